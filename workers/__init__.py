"""Workers: the processes and dispatchers that run projections."""
