"""The ops wing: every pytree op on embedded or user trees, per backend.

`workloads` (the embedded trees), `backends` (one interface over every
library), `timing` (interleaved rounds of cells), `optable` and `scaling`
(what is timed), `usertree` (`--tree`), `results` and `tables` (what was
measured, as objects and as text). Needs nothing beyond cpytree; importing
it imports no backend (`backends.discover()` does).
"""
