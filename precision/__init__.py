"""Precision lab: formats, rounding, metrics, budgets and strategies. Built in a later issue."""
