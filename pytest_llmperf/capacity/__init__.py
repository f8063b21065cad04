"""Capacity at SLOs: the largest load (concurrency or request rate) whose runs meet every
SLO in the share of requests asked, found by a bracketing pass and bisection over an
injected probe (one run of a workload at a load on a fresh start), each probe repeated near
the boundary until its pass or fail is decided. `slo.py` reads the SLOs and judges one
probe's runs against them; `search.py` searches. It starts no server and knows nothing of
pytest: it may import metrics/, stats/ and util/ only."""
