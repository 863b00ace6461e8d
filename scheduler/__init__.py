"""The portalq service: CLI, scheduler tick, workers, escalation mail, metrics."""
