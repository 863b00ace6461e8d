"""The database: where it is, its connections and pools, the embedded server, the schema,
migrations and every SQL statement."""
