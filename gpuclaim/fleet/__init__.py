"""The fleet view (issue 26): which devices each pod got, where GPUs sit free, stranded or fragmented."""
