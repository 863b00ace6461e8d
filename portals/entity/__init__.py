"""``file_entity``: one job type, filed on the portal of the entity's jurisdiction (BC or
Delaware)."""
