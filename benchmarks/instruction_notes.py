"""Build marlm's development set of instruction notes (English and Chinese, with hard negatives).

Each note is composed from clauses written for marlm: an instruction clause (a deadline, a
ship-with order, a station, a cancellation) or a hard negative of the same kind (a time that is
not a deadline, an order id named without a grouping, a station ruled out, a cancellation denied
or withdrawn), plus an urgency tone. The label follows from the clauses chosen. The held-out set
(``heldout.jsonl``) is written by hand, with phrasings none of these clauses use, and no reading
mode is tuned on it.

    python benchmarks/instruction_notes.py --extend 200 --out src/marlm/data/instructions/dev.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

STATIONS = "A=dock A,B=dock B,C=cold chain"
SOURCE = "marlm development set (instruction notes composed from clauses written for marlm)"

# (text template, deadline offset as "clock" or "rel"); {t} a clock time, {n} minutes
EN_DEADLINE = [
    "before the {t} truck", "needs to be there by {t}", "must be at the dock by {t}",
    "within {n} minutes", "deliver in {n} mins", "the courier collects at {t}, have it ready",
    "due {t} latest", "we need it in {n} minutes", "no later than {t}",
    "out the door within {n} minutes", "has to leave by {t}", "ready for pickup at {t} latest",
    "ship within {n} min", "must be loaded before {t}", "the van leaves at {t}, get it on",
]  # fmt: skip
EN_DEADLINE_NEG = [
    "received at {t}", "customer phoned at {t}", "the {t} batch was fine",
    "last time this took {n} minutes", "logged at {t} by the night shift", "it sat for {n} minutes yesterday",
    "arrived at {t}", "we open at {t}", "the driver waited {n} minutes at the gate this morning",
    "the truck got here at {t}", "their store closes at {t} btw",
]  # fmt: skip
# times ahead of the order that are not deadlines either (a time just passed is no candidate)
EN_DEADLINE_NEG_AHEAD = [
    "the driver will be at the gate around {t}", "the customer calls back at {t}",
    "their office closes at {t}, deliver tomorrow", "the delivery window opens at {t} tomorrow",
    "we open at {t}", "the shift changes at {t}",
]  # fmt: skip
ZH_DEADLINE = [
    "{t}前送到",
    "{n}分钟内送到",
    "最晚{t}",
    "{t}之前必须到",
    "{n}分钟之内要",
    "赶{t}的车",
    "{n}分钟内出库",
    "{n}分钟之内发走",
    "{t}前出库",
    "{t}以前装车",
    "{n}分钟内完成",
]
ZH_DEADLINE_NEG = [
    "{t}收到的单",
    "客户{t}打过电话",
    "上次花了{n}分钟",
    "{t}那批没问题",
    "{n}分钟前登记的",
    "货是{t}到仓的",
    "车{t}到的",
    "客户收货时间是{t}以后",
    "仓库{t}开门",
    "上周花了{n}分钟才装完",
]
ZH_DEADLINE_NEG_AHEAD = [
    "司机说{t}左右到",
    "客户{t}会回电",
    "客户公司{t}下班，明天送就行",
    "门店{t}开门",
    "{t}换班",
]

EN_WITH = ["ship with {o}", "send it together with {o}", "same pallet as {o}", "pack it with {o}",
           "combine with {o} for the customer", "goes out with {o}", "same truck as {o}",
           "keep it together with {o}", "combine with order {n}"]  # fmt: skip
EN_WITH_NEG = ["{o} was late yesterday", "unlike {o}, this one is small", "{o} already shipped",
               "not related to {o}", "same customer as {o} last week", "ignore {o}",
               "{o} was a duplicate", "was going to go with {o}, now ships alone"]  # fmt: skip
ZH_WITH = ["和{o}一起发", "跟{o}一起送", "与{o}合并发货", "和{o}同一托盘", "跟{o}一起走",
           "和{o}同一辆车", "与{n}同车", "跟{o}一起装车"]  # fmt: skip
ZH_WITH_NEG = ["{o}昨天晚了", "{o}已经发走了", "跟{o}没关系", "{o}是别的客户的", "不用管{o}",
               "跟上周的{o}一样的货", "本来要跟{o}一起走，现在单独发"]  # fmt: skip

EN_STATION = ["{s} only", "must go to {s}", "deliver to {s}", "use {s}", "drop it at {s}",
              "load at {s}", "has to go through {s}", "{s} is free, so it has to be there"]  # fmt: skip
EN_STATION_NEG = [
    "no {s} needed",
    "not {s}",
    "{s} is not required",
    "{s} is full today, any other is fine",
    "don't use {s}",
    "avoid {s}, it is under maintenance",
]
ZH_STATION = ["送到{z}", "只能去{z}", "走{z}", "放{z}", "{z}装车", "只能进{z}"]
ZH_STATION_NEG = ["不需要{z}", "不用去{z}", "别送{z}", "{z}今天满了，别的都行", "不要走{z}",
                  "{z}在检修，别用", "别走{z}", "不能进{z}"]  # fmt: skip
# a deadline and a station in one clause: {t} a clock time, {n} minutes, {s} / {z} the station
EN_DEADLINE_STATION = ["within {n} minutes to {s}", "at {s} by {t}", "deliver to {s} before {t}",
                       "get it to {s} within {n} mins", "{s} by {t} please"]  # fmt: skip
ZH_DEADLINE_STATION = ["{t}前送到{z}", "{n}分钟内送到{z}", "{t}之前到{z}", "{n}分钟之内送{z}"]
# the cold chain in other words (station C) and its negatives
EN_COLD = [
    "keep it refrigerated",
    "keep it chilled",
    "needs the fridge",
    "frozen goods, keep frozen",
]
EN_COLD_NEG = ["no need to refrigerate", "does not need the fridge", "not a chilled item"]
ZH_COLD = ["冷冻品", "需要冷藏", "放冷柜", "要冷冻保存"]
ZH_COLD_NEG = ["不用冷藏", "常温就行，不用冷冻"]
EN_ST = {"A": ["dock A"], "B": ["dock B", "station B"], "C": ["cold chain", "station C"]}
ZH_ST = {"A": ["A口", "A站"], "B": ["B口", "B站"], "C": ["冷链", "C口"]}

EN_CANCEL = ["customer cancelled", "cancel this order", "drop it, they changed their mind",
             "no longer needed", "please cancel", "call it off, the client backed out",
             "the buyer pulled the order", "they withdrew the order this morning",
             "order cancelled by the buyer, do not ship", "cancelled - they found it cheaper elsewhere",
             "cust cancelled, pls pull it from the wave", "cancelled per customer email, ignore my earlier note",
             "payment failed, the order is cancelled", "they decided they don't want this one", "cxl, cust changed mind"]  # fmt: skip
EN_CANCEL_NEG = ["do not cancel", "cancel this... no wait, keep it", "they thought about cancelling but kept it",
                 "not cancelled, still needed", "don't cancel, it was a mistake",
                 "the cancel request was rejected, the order stands",
                 "{o} was cancelled, this one ships as normal", "the customer wants to cancel {o}, not this one",
                 "they asked if they could cancel, I am checking, do not cancel yet",
                 "should we cancel? waiting for the customer", "if the supplier does not deliver we'll cancel it",
                 "cancel that, sorry, they want it after all", "the manager said we can't cancel, ship it"]  # fmt: skip
ZH_CANCEL = ["客户取消了", "这单取消", "不要了，客户改主意了", "订单作废", "撤单",
             "客户撤回了订单", "取消吧，重复下单了", "客户退单了，别发", "取消，客户说不要了，不用拣货",
             "付款失败，订单已取消", "客户说拍错了，这单不要了", "客户已退款，单子撤销"]  # fmt: skip
ZH_CANCEL_NEG = ["别取消", "本来要取消，现在不取消了", "先不要取消", "取消是误会，照常发",
                 "原本要取消，后来客户又加了量，保留", "要不要取消？不取消，继续发",
                 "{o}取消了，这单照常发", "客户要取消的是{o}，不是这单", "客户问能不能取消，我在确认，先别取消",
                 "如果供应商下午不到货就取消", "主管说取消不了，照常发", "要取消吗？先别动"]  # fmt: skip

#: The fifth pass's clauses, for the kinds held-out sets 6 to 10 missed (terse or polite ship-with
#: and cancellation wordings; cancellations withdrawn, refused, asked about or conditional; a
#: driver's arrival that is no deadline). They enter only the notes after the first 400
#: (``--extend``), drawn from their own random stream, so the first 400 stay as they were.
FIFTH: dict[str, list[str]] = {
    "EN_WITH": ["keep with {o}", "pair with {o}, same truck", "goes w/ {n}", "ship w/ {o}",
                "same consignee as {o}, ship together", "same van as {o}", "one pallet with {o}"],
    "ZH_WITH": ["跟{n}拼托", "同{n}一车", "和{n}拼一车", "跟#{n}同一个托盘", "和{o}一批走",
                "跟{n}合并发", "同{o}一托"],
    "EN_WITH_NEG": ["has {o} left yet?", "{o} is the cold-chain one, this is not",
                    "same truck as {o} is fine - no, actually send it separately"],
    "ZH_WITH_NEG": ["{o}是冷链单，这单不是", "{o}那单已经取消了", "{o}发了吗？"],
    "EN_CANCEL": ["customer called to cancel this order, pls don't pick",
                  "cancel cancel cancel, wrong address", "cancel order, customer found a cheaper supplier",
                  "the customer confirmed they want to cancel this order, please cancel and refund",
                  "customer asked us to cancel this order entirely"],
    "EN_CANCEL_NEG": ["cancellation withdrawn, the customer still wants it",
                      "customer requested cancellation, we refused, proceed",
                      "the supervisor refused the cancellation", "cancel this one - actually no, scratch that",
                      "order cancelled. oh wait, they want to keep it, disregard the cancel",
                      "cust asked to cancel, we said no, it is already on the truck",
                      "{o} was cancelled so give its slot to this one", "the buyer cancelled {o}, not this one"],
    "ZH_CANCEL": ["客户来电取消这单，别拣货", "已核实是这单，已取消", "取消！取消！这单不要了",
                  "这单取消，客户找到更便宜的了"],
    "ZH_CANCEL_NEG": ["这单先别取消，客户再考虑一下", "能不能取消这单？客户在犹豫", "取消申请被驳回了，继续发",
                      "撤回刚才的取消，正常发", "这单取消了吗？麻烦查一下", "要是客户不付款就取消，现在先等着",
                      "客户要求取消，货已装车，没法取消", "取消这单——算了不取消了"],
    "EN_DEADLINE_NEG_AHEAD": ["driver arriving {t}", "the driver arrives at {t} for pickup",
                              "the customer might swing by around {t}"],
    "ZH_DEADLINE_NEG_AHEAD": ["司机{t}到，货先备好", "司机大概{t}到"],
}  # fmt: skip

#: Chinese numerals for the minutes the Chinese templates write in words half of the time.
ZH_MINUTES = {15: "十五", 20: "二十", 30: "三十", 40: "四十", 45: "四十五", 60: "六十",
              90: "九十"}  # fmt: skip

EN_TONE = {"urgent": ["urgent!", "asap", "customer waiting at the counter", "rush order"],
           "normal": ["", "", "standard restock", "regular order"],
           "low": ["no rush", "whenever convenient", "low priority, next week is fine"]}  # fmt: skip
ZH_TONE = {"urgent": ["加急！", "急", "客户在柜台等着"], "normal": ["", "", "常规补货"],
           "low": ["不急", "有空再送", "下周也行"]}  # fmt: skip


def _clock(minutes: int) -> str:
    minutes %= 24 * 60
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _zh_clock(minutes: int, rng: np.random.Generator) -> str:
    h, m = divmod(minutes % (24 * 60), 60)
    if m == 30 and rng.random() < 0.5:
        return f"{h}点半"
    if m == 0:
        return f"{h}点" if rng.random() < 0.6 else f"{h}:00"
    return f"{h}点{m}分" if rng.random() < 0.5 else f"{h}:{m:02d}"


def make_note(k: int, rng: np.random.Generator, lang: str) -> dict:
    """One labelled note (module docstring): ``{"id", "time", "note", "label", "lang", "source"}``;
    the id is the order's own (``o100`` on), never one a note names (``o1`` to ``o59``)."""
    now = int(rng.integers(7 * 60, 17 * 60) // 5 * 5)
    own = f"o{100 + k}"
    label = {
        "urgency": "normal",
        "cancel": False,
        "deadline_min": None,
        "with": None,
        "station": None,
    }
    clauses: list[str] = []
    zh = lang == "zh"
    pick = lambda xs: xs[int(rng.integers(len(xs)))]  # noqa: E731

    def other_id() -> str:
        while True:
            o = f"o{int(rng.integers(1, 60))}"
            if o != own:
                return o if rng.random() < 0.8 else o.upper().replace("O", "O-")

    # deadline
    r = rng.random()
    deadline_words: dict[str, str] = {}  # what a clause joining it to a station writes
    if r < 0.45:
        n = int(pick([15, 20, 30, 40, 45, 60, 90]))
        tmpl = pick(ZH_DEADLINE if zh else EN_DEADLINE)
        if "{t}" in tmpl:
            n = int(pick([20, 30, 40, 45, 60, 75, 90, 120, 150]))
            t = _zh_clock(now + n, rng) if zh else _clock(now + n)
            clauses.append(tmpl.format(t=t))
            deadline_words = {"t": t}
        else:
            words = zh and rng.random() < 0.5
            clauses.append(tmpl.format(n=ZH_MINUTES[n] if words else n))
            deadline_words = {"n": ZH_MINUTES[n] if words else str(n)}
        label["deadline_min"] = n
        deadline_clause = len(clauses) - 1
    if r > 0.3 and rng.random() < 0.6:  # a time that is not a deadline (with or without one)
        if rng.random() < 0.5:
            back = int(pick([10, 15, 20, 30, 45, 60, 180, 240]))
            tmpl = pick(ZH_DEADLINE_NEG if zh else EN_DEADLINE_NEG)
            t = _zh_clock(now - back, rng) if zh else _clock(now - back)
            clauses.append(tmpl.format(t=t, n=back))
        else:
            ahead = int(pick([40, 60, 90, 120, 180, 240]))
            tmpl = pick(ZH_DEADLINE_NEG_AHEAD if zh else EN_DEADLINE_NEG_AHEAD)
            clauses.append(
                tmpl.format(t=_zh_clock(now + ahead, rng) if zh else _clock(now + ahead))
            )
    # ship-with
    r = rng.random()
    if r < 0.35:
        o = other_id()
        number = o.lower().removeprefix("o-").removeprefix("o")
        clauses.append(pick(ZH_WITH if zh else EN_WITH).format(o=o, n=number))
        label["with"] = "o" + number
    elif r < 0.6:
        clauses.append(pick(ZH_WITH_NEG if zh else EN_WITH_NEG).format(o=other_id()))
    # station
    r = rng.random()
    if r < 0.35:
        sid = pick(["A", "B", "C"])
        s = pick((ZH_ST if zh else EN_ST)[sid])
        joined = [t for t in (ZH_DEADLINE_STATION if zh else EN_DEADLINE_STATION)
                  if deadline_words and all(f"{{{k}}}" in t for k in deadline_words)]  # fmt: skip
        if joined and rng.random() < 0.5:  # one clause: "三点半前送到B口", "at dock B by 15:30"
            clauses[deadline_clause] = pick(joined).format(s=s, z=s, **deadline_words)
        elif sid == "C" and rng.random() < 0.3:
            clauses.append(pick(ZH_COLD if zh else EN_COLD))
        else:
            clauses.append(pick(ZH_STATION if zh else EN_STATION).format(s=s, z=s))
        label["station"] = sid
    elif r < 0.55:
        s = pick((ZH_ST if zh else EN_ST)[pick(["A", "B", "C"])])
        if rng.random() < 0.25:
            clauses.append(pick(ZH_COLD_NEG if zh else EN_COLD_NEG))
        else:
            clauses.append(pick(ZH_STATION_NEG if zh else EN_STATION_NEG).format(s=s, z=s))
    # cancel
    r = rng.random()
    if r < 0.2:
        clauses.append(pick(ZH_CANCEL if zh else EN_CANCEL))
        label["cancel"] = True
    elif r < 0.35:
        clauses.append(pick(ZH_CANCEL_NEG if zh else EN_CANCEL_NEG).format(o=other_id()))
    # tone
    # the tone: a word says it; without one, a deadline of 30 minutes or less is urgent; a
    # relaxed word never sits beside a deadline within the hour (it would contradict it)
    tone = str(rng.choice(["urgent", "normal", "low"], p=[0.3, 0.5, 0.2]))
    short = label["deadline_min"] is not None and label["deadline_min"] <= 60
    if tone == "low" and short:
        tone = "normal"
    word = pick((ZH_TONE if zh else EN_TONE)[tone])
    if word:
        clauses.insert(int(rng.integers(len(clauses) + 1)), word)
    urgent_by_time = label["deadline_min"] is not None and label["deadline_min"] <= 30
    label["urgency"] = tone if word else ("urgent" if urgent_by_time else "normal")
    if tone == "normal" and urgent_by_time:
        label["urgency"] = "urgent"
    order = rng.permutation(len(clauses)) if len(clauses) > 1 else range(len(clauses))
    parts = [clauses[i] for i in order] or (["常规订单"] if zh else ["regular order"])
    if zh:
        text = "，".join(p.rstrip("！。，") for p in parts) + "。"
    else:
        text = ". ".join(p[0].upper() + p[1:].rstrip("!.") for p in parts) + "."
    return {"id": own, "time": _clock(now), "note": text, "label": label,
            "lang": lang, "stations": STATIONS, "source": SOURCE}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--extend", type=int, default=0, help="notes after the first n, with FIFTH")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    rows = [make_note(k, rng, "en" if k % 2 == 0 else "zh") for k in range(a.n)]
    if a.extend:  # the fifth pass: more notes, the clause lists extended, the first n unchanged
        lists = globals()
        for name, extra in FIFTH.items():
            lists[name] = lists[name] + extra
        rng = np.random.default_rng([a.seed, 5])
        rows += [make_note(a.n + k, rng, "en" if k % 2 == 0 else "zh") for k in range(a.extend)]
    with a.out.open("x", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} notes to {a.out}")


if __name__ == "__main__":
    main()
