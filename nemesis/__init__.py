"""Faults on hosts, their seeded schedules, and their exact reversal."""
