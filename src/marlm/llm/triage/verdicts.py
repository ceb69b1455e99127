"""What the wording of a note settles without the model: a cancellation that holds or does not,
a ship-with id that holds or is ruled out.

The heads (:mod:`marlm.llm.triage.instructions`) read a clause's hidden state; some notes say
plainly what they mean in words a parser can name, and there the parser's verdict is taken
(:func:`settle`): a cancellation undone, refused, conditional, asked about or given to another
order does not hold, one the note opens with or names this order in holds
(:func:`cancel_verdict`); an order id in a clause that groups the two orders ("same pallet as
#1702", "和1752那单一起走") is the ship-with, one named as a duplicate or kept apart is not
(:func:`with_verdict`). Everything else is the model's (``None``).
"""

from __future__ import annotations

import dataclasses
import re

from marlm.llm.triage.candidates import (
    Candidate,
    Candidates,
    cancel_cues,
    find_candidates,
    span_between,
)

# A cancellation the note undoes, refuses, makes conditional, asks about or gives to another
# order: it does not hold.
_NOT_HOLDING = re.compile(
    r"\b(scratch that|never ?mind,? (?:keep|ship|send)|(?:still|do) want (?:it|this|the order|them)"
    r"|want (?:it|this|the order|them) after all|un-?cancel\w*|disregard|(?:still|do) need (?:it|th)"
    r"|ignore (?:that|the|my|our) (?:earlier |previous |last )?(?:cancel\w*|request|email|message)"
    r"|keep (?:it|this|the order)(?=\s*(?:[,.!;—-]|$|after all|then|please|pls|for now|and ship|live|going|active|open))"
    r"|wait,? no\b|not this (?:one|order)|\bnot (?:been )?cancel\w*|whether\b.{0,30}cancel|keep this one|jk\b|just kidding"
    r"|this (?:one|order) (?:stays|still ships|ships as|goes as|is fine)|not decided|undecided|depending on"
    r"|(?:may|might|maybe) cancel"
    r"|(?:can'?t|cannot|can not|won'?t|will not|do(?:n'?t| not)|not to|no need to|never) "
    r"(?:be )?(?:cancel|cxl)\w*|withdr\w* (?:the |their |his |her |that )?(?:cancel\w*|request)"
    r"|(?:request|offer)[^.!。！]{0,30}\b(?:rejected|declined|refused|denied|turned down)"
    r"|cancel\w* (?:was |is |has been )?(?:rejected|declined|refused|denied)"
    r"|cancel\w*[^.!。！]{0,30}\b(?:we|they|you) (?:can'?t|cannot|couldn'?t)\b|reinstat\w*"
    r"|cancel\w*[^.!。！]{0,40}\b(?:says?|said) no\b"
    r"|(?:turned down|rejected|declined|refused) (?:it\b|(?:the |our |their )?"
    r"(?:offer to cancel|cancel\w*|request))|(?:are|is|should|shall|can|could) (?:we|they|i)"
    r" (?:still )?(?:be )?cancel\w*"
    r"|cancel\w*[^.!。！]{0,12} or not)"
    r"|(别取消|不要取消|不取消|取消不了|无法取消|没法取消|不能取消|不用取消|暂不取消|先别取消|撤回了?取消"
    r"|撤销取消|取消.{0,6}(?:撤回|撤销|驳回)|驳回|又说(?:还)?要|说还是要|取消不取消|要不要取消|能不能取消"
    r"|是否取消|取消的是|不是这单|不是这个|不是本单|又要了|恢复|这单(?:照常|照发|不动|正常|继续|不变)|取消.{0,4}误会|不同意取消|不让取消|(?:能不能|能否|可不可以|可否|要不要).{0,8}取消)",
    re.IGNORECASE,
)
# A question about the cancellation ("too late to cancel this?", "这单取消了吗？"), unless it is
# a request put politely ("could you cancel this one?", "能帮我把这单取消吗？").
_ASKED = re.compile(r"cancel\w*[^.!。！]{0,40}\?|取消.{0,12}[吗么？?]", re.IGNORECASE)
_REQUEST = re.compile(
    r"\b(?:would|could|can|will) (?:you|u)\b[^.?!]{0,25}\bcancel|\bmind cancel|\bplease\b"
    r"[^.?!]{0,20}cancel|\bpls\b[^.?!]{0,20}cancel|帮(?:我|忙)",
    re.IGNORECASE,
)
# A condition on the cue in its sentence ("if ..., cancel", "cancel if ...", "要是...就取消").
_CONDITION = re.compile(r"\b(if|unless|in case|should the)\b|如果|要是|万一|假如|若是", re.I)
_NOT_A_CONDITION = re.compile(r"\bif (?:possible|you can|not already|needed)\b", re.I)
_SENTENCE = re.compile(r"[.;!?。；！？\n]")
_CLAUSE = re.compile(r"[.;!?。；！？\n，,]| and | but ")


# An order number: with its ``o``, ``#`` or "order" (``o42``, ``#42``), or bare from three digits.
_NUMBER = re.compile(r"(?:\b[oO]-?\s?|#|\border\s+)(\d+)|(?<![\d:])(\d{3,})(?![\d:])", re.I)
# Another order named beside a cue: ``o2019``, "order 2019" or a bare 3-5 digit number (not a
# "#" reference, which is often a ticket).
_ORDER_REF = re.compile(r"(?:\b[oO]-?\s?|\border\s+)(\d+)|(?<![\d:#])(\d{3,5})(?![\d:])", re.I)
# Another order's cancellation ("那单已经取消了"), where nothing says this order's.
_OTHERS = re.compile(r"那单.{0,6}(?:取消|作废)")


# This order's own cancellation, worded so no model is needed: the note opens with it, or it
# names this order ("cancel this order", "这单取消", "cancel order o12" for o12).
_OPENS = re.compile(
    r"^\W*(?:pls |please |kindly )?(?:cancel(?:led)?|cxl|canx)\b(?! (?:o|order|#)?\s*\d)"
    r"|^\W*(?:这单|本单|此单|该单)?(?:取消|作废|不要了)",
    re.IGNORECASE,
)
_THIS = re.compile(
    r"\b(?:cancel|cxl)\w* (?:this|this one|this order|the order|it)\b|\bthis (?:order|one) "
    r"(?:is |has been |was )?cancel\w*|(?:这单|本单|此单|该单)(?:已经?|就)?(?:取消|作废|不要了)|取消(?:这单|本单|此单)"
    r"|把(?:这单|本单|此单)取消",
    re.IGNORECASE,
)


def cancel_verdict(
    note: str, own_id: str | None = None, cues: list[Candidate] | None = None
) -> bool | None:
    """Whether this order's cancellation holds, where the wording settles it; ``None`` where
    only the model can tell (:class:`Candidates.cancel_settled`).

    ``False``: the note has a cancellation cue but undoes, refuses, makes conditional or asks
    about it ("scratch that", "request rejected", "别取消", "取消不取消明天再定", "if ..., cancel",
    "can we cancel?"). ``True``: none of those, and the note opens with the cancellation
    ("CANCEL. Duplicate of o12", "这单取消，1588照常发") or names this order in it ("cancel this
    order", "cancel order o12" for order o12). Otherwise ``None``. ``cues``: the note's
    cancellation cues where the caller has them (:func:`~.candidates.cancel_cues`).
    """
    cues = cancel_cues(note) if cues is None else cues
    if not cues:
        return None
    if _NOT_HOLDING.search(note):
        return False
    for m in _ASKED.finditer(note):
        start, end = span_between(note, m.span(), _SENTENCE)
        if not _REQUEST.search(note, start, end):
            return False
    for cue in cues:
        start, end = span_between(note, cue.span, _SENTENCE)
        sentence = _NOT_A_CONDITION.sub("", note[start:end])
        if _CONDITION.search(sentence):
            return False
    digits = re.sub(r"\D", "", own_id or "")
    named = False  # this order's number in a cue's clause, and no other order's number there
    others = True  # every cue's clause names another order's number only
    for cue in cues:
        start, end = span_between(note, cue.span, _CLAUSE)
        numbers = {a or b for a, b in _NUMBER.findall(note[start:end])}
        named = named or (bool(digits) and numbers == {digits})
        refs = {a or b for a, b in _ORDER_REF.findall(note[start:end])}
        others = others and bool(refs) and digits not in refs
    if _OPENS.search(note) or _THIS.search(note) or named:
        return True
    return False if others or _OTHERS.search(note) else None


# --------------------------------------------------------------------------- ship-with
# A clause that puts two orders on one pallet, truck or shipment.
_GROUPS = re.compile(
    r"\b(?:same (?:pallet|truck|van|shipment|load|trip|delivery|container|cage|trolley|tote|box"
    r"|vehicle|run|lorry|flatbed|consignment|drop|courier|driver|slot)|together|along with"
    r"|combine[ds]? with|consolidate[ds]? with|palleti[sz]e[ds]? with|bundle[ds]? with"
    r"|pair(?:ed)? with|ship(?:s|ped)? with|go(?:es)? with|goes out with|load(?:ed)? with"
    r"|keep with|one pallet|one truck|one van)\b|\bw/"
    r"|一起|一车|同车|拼车|拼一|拼托|同一托|同一个托|同一个柜|同一批|一块|合并|放一起|同一辆",
    re.IGNORECASE,
)
# A clause that names another order only to keep it apart or as the same order again.
_APART = re.compile(
    r"\b(?:dup(?:e|licate)?s? of|instead of|not with|separately|separate from|apart from"
    r"|don'?t (?:ship|send|put|combine|group)|do not (?:ship|send|put|combine|group)|replaces?)\b"
    r"|重复|不要和|别和|不跟|不和|分开|单独",
    re.IGNORECASE,
)


# A grouping the note undoes ("was going to go with o8, now ships alone", "本来要跟o36一起走，现在
# 单独发", "ignore the 'ship with o1543'").
_UNDONE = re.compile(
    r"now ships alone|ships? alone|(?:send|ship)s? (?:it )?separately|was going to (?:go|ship) with"
    r"|ignore the .{0,20}(?:with|together)|单独(?:发|走|送)|分开(?:发|走|送)|本来要(?:跟|和)"
    r"|之前说(?:跟|和).{0,12}(?:作废|取消)",
    re.IGNORECASE,
)


def with_verdict(c: Candidates, note: str = "") -> str | bool | None:
    """The ship-with id the wording of ``note`` settles: the first id whose clause groups the
    orders and does not keep them apart; ``False`` when every id's clause keeps them apart or
    names a duplicate, or the note undoes its one grouping; ``None`` otherwise (the model's)."""
    if not c.with_:
        return None
    if _UNDONE.search(note):  # one id: the grouping undone; more: the model tells which
        return False if len(c.with_) == 1 else None
    apart = [bool(_APART.search(x.context)) for x in c.with_]
    for x, kept_apart in zip(c.with_, apart, strict=True):
        if not kept_apart and _GROUPS.search(x.context):
            return str(x.value)
    return False if all(apart) else None


def settle(c: Candidates, note: str, own_id: str | None = None) -> Candidates:
    """``c`` with :attr:`Candidates.cancel_settled` and :attr:`Candidates.with_settled` set
    from the wording of ``note`` (:func:`cancel_verdict`, :func:`with_verdict`)."""
    return dataclasses.replace(
        c, cancel_settled=cancel_verdict(note, own_id, c.cancel), with_settled=with_verdict(c, note)
    )


def read_candidates(
    note: str, time: str | int, stations: dict[str, str] | None = None, own_id: str | None = None
) -> Candidates:
    """:func:`~marlm.llm.triage.candidates.find_candidates` with the wording's verdicts
    (:func:`settle`).

    Raises:
        InputError: ``time`` is a string that is not ``HH:MM``.
    """
    return settle(find_candidates(note, time, stations, own_id), note, own_id)


__all__ = ["cancel_verdict", "read_candidates", "settle", "with_verdict"]
