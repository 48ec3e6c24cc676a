"""The fleet view (issue 26, docs/fleet.md): who uses which device, where devices sit free, used or stranded."""
