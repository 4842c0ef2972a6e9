"""Rewards over HTTP: every registered scorer behind OpenRLHF's ``/get_reward``, NeMo-Gym's
``/verify`` and a native batch protocol (``/score``), scored in a pool of worker processes
that a hanging or crashing scorer cannot take down, with a verl client
(:func:`reward_plugins.serve.client.compute_score_remote`) and a Ray Serve deployment.

Modules: :mod:`.protocols` (the three request shapes), :mod:`.service` (routing),
:mod:`.client` and :mod:`.client_settings` (verl's side), :mod:`.ray_serve` (scale-out). The
HTTP/1.1 server, the worker pool and the rows they pass are in :mod:`reward_plugins.runtime`,
shared with the retriever and the re-scoring engine.
"""
