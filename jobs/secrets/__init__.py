"""Secrets and keys: envelope encryption, key providers, sealing a job's secret fields,
rotation, and what a person may see."""
