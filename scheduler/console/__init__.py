"""The admin console (``portalq console``): a server-rendered Starlette application.

Pages: overview (live over server-sent events), jobs (filters, keyset pages, bulk actions),
a job (timeline, checkpoints, screenshots, trace, documents, escalation, actions),
escalations inbox, portals, audit log. Users and roles in ``jobs.admin.users``; every
write is role-checked, CSRF-checked (asgi-csrf) and audited (``jobs.audit``).
"""
