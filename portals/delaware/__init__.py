"""Delaware's Division of Corporations (eCorp2 document filing): the flow, the certificate it
uploads, the stand-in."""
