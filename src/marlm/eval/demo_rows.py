"""The demo's rows of figures, shared by its terminal table (``marlm demo``) and the report page
(``marlm report``): this run's figures beside the rule counterfactual's, its own figures, and the
model's reading. Each row is ``(label, value)`` or ``(label, value, rule's value or None)``,
values already formatted as text."""

from __future__ import annotations


def fmt(v) -> str:
    """A figure as the table shows it: ``-`` for None, 3 significant digits below 100."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def share(v) -> str:
    """A share in [0, 1] as a whole percentage; ``-`` for None."""
    return "-" if v is None else f"{100 * v:.0f}%"


def side_rows(m: dict, cf: dict | None) -> list[tuple[str, str, str | None]]:
    """The rows with a figure of the rule counterfactual beside this run's."""
    own = m.get("by_true_class") or {}
    idle = m.get("idle_robot_steps") or {}
    cf_idle = (cf or {}).get("idle_robot_steps") or {}
    classes = [c for c in ("urgent", "normal", "low") if c in (own.get("latency_mean_steps") or {})]
    truth = m.get("true_class_source", "listed priority")
    total, arrived = m.get("orders_total"), m.get("orders_arrived")
    # A run cut short (--steps) ends before some orders arrive: say so, or "14 / 26" reads as
    # twelve orders failed.
    not_all = isinstance(total, int) and isinstance(arrived, int) and arrived < total
    return [
        ("orders delivered", f"{m['delivered']} / {m.get('orders_total', '?')}",
         None if cf is None else f"{cf['delivered']} / {m.get('orders_total', '?')}"),
        *([("orders arrived by the last step", f"{arrived} / {total}",
            None if cf is None else f"{cf.get('orders_arrived', '?')} / {total}")]
          if not_all else []),
        ("throughput per 1000 steps", fmt(m.get("throughput_per_1000_steps")),
         None if cf is None else fmt(cf.get("throughput_per_1000_steps"))),
        *[
            (f"mean order latency, {c} by {truth} (steps)",
             fmt(own["latency_mean_steps"].get(c)),
             None if cf is None else fmt(cf["latency_mean_steps"].get(c)))
            for c in classes
        ],
        *instruction_rows(m.get("instructions"), (cf or {}).get("instructions"), cf is not None),
        *[
            (f"idle robot-steps with an order waiting: {cause.replace('_', ' ')}",
             fmt(idle.get(cause)), None if cf is None else fmt(cf_idle.get(cause)))
            for cause in ("waiting_for_model", "no_order", "blocked")
        ],
    ]  # fmt: skip


def instruction_rows(
    own: dict | None, rule: dict | None, with_rule: bool
) -> list[tuple[str, str, str | None]]:
    """The instructions scenario's rows (none without its figures): what each run did with the
    notes' instructions, counted against what the notes mean
    (:func:`marlm.experiments.instructions_scenario.instruction_figures`)."""
    if not own:
        return []
    rows = (
        ("cancelled orders delivered", "cancelled_delivered", "cancelled_total"),
        ("required stations met", "stations_met", "stations_required"),
        ("ship-with pairs together", "pairs_together", "pairs"),
        ("worded deadlines met", "worded_deadlines_met", "worded_deadlines"),
    )

    def cell(f: dict | None, got: str, total: str) -> str | None:
        return None if f is None else f"{f[got]} / {f[total]}"

    out = [(label, cell(own, got, total) or "-", cell(rule, got, total) if with_rule else None)
           for label, got, total in rows]  # fmt: skip
    if "read_in_time" in own:
        out.append(("  instruction notes read before their delivery",
                    f"{own['read_in_time']} / {own['instruction_notes']}", None))  # fmt: skip
    if own.get("deferred"):
        out.append(("  orders deferred while robots were short", str(own["deferred"]), None))
    for label, key in (("orders not cancelled, delivered", "delivered_kept"),
                       ("step of the last delivery", "last_delivery_step")):  # fmt: skip
        out.append((label, fmt(own.get(key)), fmt((rule or {}).get(key)) if with_rule else None))
    return out


def own_rows(m: dict) -> list[tuple[str, str]]:
    """The rows of this run's figures only."""
    own = m.get("by_true_class") or {}
    lat = m.get("order_latency_mean_steps") or {}
    return [
        ("on-time rate", fmt(m.get("on_time_rate"))),
        *[
            (f"mean order latency, listed {p} (steps)", fmt(lat.get(p)))
            for p in ("urgent", "normal", "low")
            if not own
        ],
        ("deadline misses", fmt(m.get("deadline_misses"))),
        ("collisions", fmt(m.get("collisions"))),
        ("shield overrides", fmt(m.get("shield_overrides"))),
        ("deadlock breaks", fmt(m.get("deadlock_breaks"))),
        ("longest still with a task (steps)", fmt(m.get("still_with_task_max_steps"))),
        ("plans that took effect", fmt(m.get("plans_effective"))),
        *(reading := reading_rows(m))[:1],
        ("  decided by the rule standing in (deadline)",
         share(m.get("decided_by_rule_stand_in_share"))),
        ("  decided by the rule after a failure", share(m.get("decided_by_fallback_share"))),
        *reading[1:],
        ("LLM calls", fmt(m.get("llm_calls"))),
        ("LLM calls unanswered / invalid",
         f"{fmt(m.get('llm_unanswered'))} / {fmt(m.get('llm_invalid'))}"),
        ("time to the first answer (s)", fmt(m.get("llm_first_answer_s"))),
        ("LLM latency p50 / p95 (ms)",
         f"{fmt(m.get('llm_latency_p50_ms'))} / {fmt(m.get('llm_latency_p95_ms'))}"),
        ("control step p50 (ms)", fmt(m.get("step_latency_p50_ms"))),
        ("control step p99 (ms)", fmt(m.get("step_latency_p99_ms"))),
        ("steps", fmt(m.get("steps"))),
    ]  # fmt: skip


def reading_rows(m: dict) -> list[tuple[str, str]]:
    """The rows of the model's reading (``metrics["reading"]``): the plans its classes reached,
    the notes it read in time, by true class, the unread backlog, notes per second and latency
    by the class it read; the model-decided share where the run has no reading figures."""
    r = m.get("reading")
    if r is None or not m.get("llm_calls"):
        return [("  decided by the model", share(m.get("decided_by_model_share")))]
    t = r["read_in_time"]
    rows = [
        (
            "  with a class the model read",
            f"{r['plans_with_model_class']} of {m.get('plans_effective')}",
        ),
        ("notes read by the model", f"{r['model_read']} of {t['orders']}"),
        *([("  the same note read before", str(r["recalled"]))] if r.get("recalled") else []),
        ("notes read in time (before assignment)", share(t["share"])),
        *[
            (f"  truly {c}", f"{share(v['share'])} ({v['in_time']} of {v['orders']})")
            for c, v in r["read_in_time_by_true_class"].items()
        ],
        (
            "unread notes worth reading, max (steps 0, 50, ...)",
            f"{r['unread_backlog']['max']} ({' '.join(map(str, r['unread_backlog']['counts'][:8]))})",
        ),
        (
            "notes read / arriving per second",
            f"{fmt(r['notes_per_s'])} / {fmt(r['arrivals_per_s'])}",
        ),
        *[
            (f"mean order latency, read {c} by the model (steps)", fmt(v))
            for c, v in r["latency_by_model_class"].items()
        ],
    ]
    return rows  # fmt: skip
