"""The stand-in kit: what every stand-in portal is built from.

    state    faults switched through ``/_control``, the ledger, the portal's sessions store
    session  cookie sessions (optional idle timeout, the one-shot ``expire_session`` fault)
    pages    escaping, links under the mount prefix, the two page families (Canadian
             registries, US filing systems), the guard every page passes (latency, hours,
             maintenance) and the pages a flow classifies (closed, maintenance, error)
    control  form controls, including the ones faults rename or wrap in a dialog
    pdf      the small real PDFs the portals hand out (certificates, letters)
    accounts a portal's accounts, sign-in settings, attempts ledger, signed-in sessions
    signin   the sign-in pages in front of a portal's own (off unless switched on)
"""
