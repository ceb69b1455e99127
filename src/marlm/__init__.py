"""marlm: multi-agent systems that put each decision where it belongs.

Three layers, three kinds of decision:

- ``marlm.rl``: reinforcement learning for high-frequency actions (every robot, every step);
- ``marlm.llm``: a language model for low-frequency semantic decisions (what an order's note means,
  which order goes first), called only when the situation changes;
- ``marlm.hybrid``: the two wired together with a rule-based shield that has the last word.
"""

__version__ = "0.1.0"
