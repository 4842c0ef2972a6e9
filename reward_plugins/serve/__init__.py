"""Rewards over HTTP: every registered scorer behind OpenRLHF's ``/get_reward``, NeMo-Gym's
``/verify`` and a native batch protocol (``/score``), scored in a pool of worker processes
that a hanging or crashing scorer cannot take down, with a verl client
(:func:`reward_plugins.serve.client.compute_score_remote`) and a Ray Serve deployment.

Modules: :mod:`.rows` (what is scored, what comes back), :mod:`.http` (the hardened HTTP/1.1
server), :mod:`.pool` (worker processes), :mod:`.protocols` (the three request shapes),
:mod:`.service` (routing), :mod:`.client` (verl), :mod:`.ray_serve` (scale-out).
"""
