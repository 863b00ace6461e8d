"""The business's side: orders and their pipelines, results, webhooks, supplied documents,
adopting an old queue."""
