"""Portal operations: accounts flows sign in with, approvals, questions to people, the mail
outbox, portals' rows."""
