"""What a note's wording settles is read without the model (:mod:`marlm.llm.triage.verdicts`).

A cancellation undone, refused, conditional, asked about or given to another order does not hold;
one the note opens with or names this order in holds. An order id in a clause that groups the
two orders is the ship-with; one named as a duplicate, kept apart, or in a grouping the note
undoes is not. Anything else is the model's (``None``). One case per kind, English and Chinese,
in phrasings of this file (not the held-out sets')."""

from __future__ import annotations

import pytest

from marlm.llm.triage.verdicts import cancel_verdict, read_candidates, with_verdict

CASES = [
    # undone or withdrawn
    ("Cancel it -- scratch that, they rang back, ship it.", False),
    ("cust wants to cancel. wait, no, keep it, sorry", False),
    ("Please disregard my earlier cancellation, we still need the parts.", False),
    ("取消这单……算了，客户又说要，照常发", False),
    ("客户撤回了取消申请，正常发货。", False),
    # refused
    ("Cancellation request was declined: the goods are already sealed on the truck.", False),
    ("Buyer asked to cancel, we can't: made to order.", False),
    ("客户想取消，但取消不了，已经装车。", False),
    # conditional, before or after the cue
    ("If the payment hasn't cleared by 4, cancel this order.", False),
    ("Cancel this one if the supplier misses the noon delivery.", False),
    ("要是下午还联系不上客户，这单就取消。", False),
    # asked about or undecided
    ("Can we cancel this? Customer is asking.", False),
    ("客户问这单要不要取消，还没定。", False),
    ("取消不取消等经理回来再说，先备货。", False),
    # another order's cancellation
    ("It's o1770 that was cancelled, not this one. Ship as normal.", False),
    ("取消的是o1770那单，这单照常。", False),
    # this order's own cancellation, beside another order's id
    ("CANCEL - dup of o1770.", True),
    ("Cancelled per customer call; o1770 still goes.", True),
    ("这单取消，o1770照常发。", True),
    ("Hello team, we would like to cancel order o1420 please. Many thanks.", True),
    ("pls cxl this order, no longer needed", True),
    ("Could you please cancel o1420? Sorry for the trouble.", True),
    ("ok, scrap 1420 then, they found it elsewhere", True),
    ("1420取消吧，谢谢", True),
    ("Buyer wants it cancelled but finance says no, it ships.", False),
    ("客户要取消，主管不同意取消，照发。", False),
    # said not to be cancelled
    ("Not cancelled. Ship to cold chain.", False),
    ("This order is NOT cancelled.", False),
    ("取消o1770，不是这个", False),
    # another order's only, its number beside the cue
    ("Customer mentioned o1770 got cancelled last week; this one is for the new site.", False),
    ("We cancelled o1770 this morning, this one replaces it.", False),
    # requests put as questions, and a real question
    ("Would you be able to cancel this one for us? Sorry!", True),
    ("能帮我把这单取消吗？预算超了", True),
    ("Is it too late to cancel this? The customer is asking.", False),
    ("can u cxl this one? jk, keep it lol", False),
    # undecided, restored
    ("We may cancel this depending on the stocktake, not decided yet.", False),
    ("之前取消的那单（就是这单）恢复一下吧，客户又要了。", False),
    # left to the model
    ("The customer cancelled their visit; deliver as usual.", None),
    ("Ship by 14:00 from dock B.", None),
]


@pytest.mark.parametrize("note,want", CASES, ids=[c[0][:40] for c in CASES])
def test_the_wording_settles_the_cancellation_or_leaves_it_to_the_model(note, want):
    assert cancel_verdict(note, "o1420") is want


def test_the_candidates_carry_the_verdict_and_a_condition_that_is_not_one_is_ignored():
    assert read_candidates("Cancel this order, and refund if possible.", "10:00").cancel_settled
    assert read_candidates("no note cue here", "10:00").cancel_settled is None
    # Another order's number after "cancel" is not this order named.
    assert cancel_verdict("Please cancel o1430, a duplicate of this one.", "o1420") is False


WITH = [
    ("Put it on the same pallet as #1770, dock B.", "o1770"),
    ("Goes out w/ o1770, same customer.", "o1770"),
    ("和1770一起走，冷链。", "o1770"),
    ("跟#1770放同一个托盘。", "o1770"),
    ("Looks like a duplicate of o1770 but it is a different customer.", False),
    ("Was going to go with o1770, now ships alone.", False),
    ("本来要跟o1770一起走，现在单独发。", False),
    ("o1770 was late yesterday; this one by 3pm.", None),
]


@pytest.mark.parametrize("note,want", WITH, ids=[c[0][:40] for c in WITH])
def test_the_wording_settles_the_ship_with_or_leaves_it_to_the_model(note, want):
    assert with_verdict(read_candidates(note, "10:00", own_id="o1420"), note) == want
    assert read_candidates(note, "10:00", own_id="o1420").with_settled == want
