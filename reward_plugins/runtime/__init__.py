"""Scoring rows outside the trainer's own call, shared by the re-scoring engine
(:mod:`reward_plugins.rescore`) and the reward service (:mod:`reward_plugins.serve`).

- :mod:`~reward_plugins.runtime.rows`: a row's columns, its ground truth and ``extra_info``,
  and :class:`~reward_plugins.runtime.rows.RowFailure` (why a row has no score);
- :mod:`~reward_plugins.runtime.scoring`: one row scored through the router
  (:func:`~reward_plugins.runtime.scoring.score_one`), its outcome and the failure kinds;
- :mod:`~reward_plugins.runtime.pool`: worker processes that isolate scorers (per-row
  timeouts, crash and memory containment);
- :mod:`~reward_plugins.runtime.ray_session`: connecting to or starting Ray, with deadlines.

It imports only the reward core; the tooling above imports it.
"""
