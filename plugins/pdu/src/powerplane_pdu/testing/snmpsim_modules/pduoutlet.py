# mypy: ignore-errors
# snmpsim variation module "pduoutlet": a switched outlet whose control object drives
# its status and load objects, as a real PDU does.
#
# snmpsim executes this file with ``moduleContext``; per data file (one simulated PDU)
# it injects ``agentContext`` (shared by every record of that file) and
# ``recordContext``. Record syntax (snmprec)::
#
#     OID|2:pduoutlet|value=1,eff=1@STATE_OID@7/0@STATE_OID@8
#
# ``value`` is the initial value; each ``eff`` item ``W@OID@X`` means "when W is written
# here, OID reads X from now on". A written value is also remembered for this OID.
# ``error=1`` makes every request to this object fail (genErr), to model a faulty outlet.
# ``already=STATUS`` (genErr, inconsistentValue, commitFailed) answers a SET that would not
# change the outlet with that error status and changes nothing, as a PDU that refuses to
# switch an outlet into the state it is in; ``state=OID`` names the outlet's state object
# (default: this one) and ``now=X`` its initial value (default: this record's ``value``).
from pysnmp.smi import error as _smi_error
from snmpsim.grammar.snmprec import SnmprecGrammar as _Grammar
from snmpsim.record.snmprec import SnmprecRecord as _Record

_ALREADY = {
    "genErr": _smi_error.GenError,
    "inconsistentValue": _smi_error.InconsistentValueError,
    "commitFailed": _smi_error.CommitFailedError,
}


def init(**context):
    pass


def _settings(value):
    if "settings" not in recordContext:  # noqa: F821
        parsed = {}
        for item in str(value).split(","):
            if "=" in item:
                key, val = item.split("=", 1)
                parsed[key] = val
        effects = []
        for item in parsed.get("eff", "").split("/"):
            if item:
                written, oid, result = item.split("@")
                effects.append((int(written), oid, int(result)))
        parsed["effects"] = effects
        recordContext["settings"] = parsed  # noqa: F821
    return recordContext["settings"]  # noqa: F821


def variate(oid, tag, value, **context):
    if not context["nextFlag"] and not context["exactMatch"]:
        return context["origOid"], tag, context["errorStatus"]
    settings = _settings(value)
    type_tag, _ = _Record.unpack_tag(tag)
    make = _Grammar.TAG_MAP[type_tag]
    text_oid = str(oid)
    if settings.get("error"):
        idx = max(0, context["varsTotal"] - context["varsRemaining"] - 1)
        raise _smi_error.GenError(name=oid, idx=idx)
    if context["setFlag"]:
        written = int(context["origValue"])
        refusal = settings.get("already")
        if refusal:
            state_oid = settings.get("state", text_oid)
            if state_oid == text_oid:
                becomes = written
            else:
                becomes = next((r for w, t, r in settings["effects"]
                                if w == written and t == state_oid), None)
            now = agentContext.get(  # noqa: F821
                state_oid, int(settings.get("now", settings.get("value", "0"))))
            if becomes is not None and int(now) == becomes:
                idx = max(0, context["varsTotal"] - context["varsRemaining"] - 1)
                raise _ALREADY[refusal](name=oid, idx=idx)
        agentContext[text_oid] = written  # noqa: F821
        for when, target, result in settings["effects"]:
            if when == written:
                agentContext[target] = result  # noqa: F821
    current = agentContext.get(text_oid, settings.get("value", "0"))  # noqa: F821
    return oid, tag, make(int(current))


def shutdown(**context):
    pass
