"""What the tooling shares: rows scored outside the trainer's own call, and the server that
serves them; used by the re-scoring engine (:mod:`reward_plugins.rescore`), the reward service
(:mod:`reward_plugins.serve`), the retriever (:mod:`reward_plugins.search`) and the adapters.

- :mod:`~reward_plugins.runtime.rows`: a row's columns, its ground truth and ``extra_info``,
  and :class:`~reward_plugins.runtime.rows.RowFailure` (why a row has no score);
- :mod:`~reward_plugins.runtime.scoring`: one row scored through the router
  (:func:`~reward_plugins.runtime.scoring.score_one`), its outcome and the failure kinds;
- :mod:`~reward_plugins.runtime.pool`: worker processes that isolate scorers (per-row
  timeouts, crash and memory containment);
- :mod:`~reward_plugins.runtime.ray_session`: connecting to or starting Ray, with deadlines;
- :mod:`~reward_plugins.runtime.http`: the hardened HTTP/1.1 server of the reward service and
  the retriever (read and idle timeouts, a connection cap, 413s);
- :mod:`~reward_plugins.runtime.openrlhf_text`: OpenRLHF's query and label, as the OpenRLHF
  adapter and the reward server read them.

It imports only the reward core; the tooling above imports it.
"""
