"""The torch wing: studies of pytree work inside torch, each run in fresh processes.

`compile_bench` (`--compile`: torch.compile of the `zoo` with and without
`cpytree.install()`, one compile per `compile_child` process; its
in-process measurements `compile_warm`, `--warm`, and `compile_replay`,
`--replay`),
`dynamo_cases`/`dynamo_probe`/`dynamo_study` (the Dynamo suite), and
`runtime_cases`/`runtime_measure`/`runtime_dist`/`runtime_bench`
(`--runtime`: eager torch paths that call pytree). All three share `modes`
(the two modes they compare, and whether torch is here) and `profiling`
(where pytree time goes in a cProfile run). Every module imports torch
only when it runs (or, for `zoo`, is only imported in a child).
"""
