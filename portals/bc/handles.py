"""Where each handle the BC flows use comes from (portals/bc/site.py): a bcgov source file
[S], or the stand-in's own page [I] -- a handle no public source shows, to be replaced once
the real page is read. One row per label, text, selector or URL part the flows act on or
read; tests/unit/test_bc_handles.py checks that every one the site module names is here.

Repositories: bcgov/namerequest (NR), bcgov/namex (NX), bcgov/business-create-ui (BCU),
bcgov/lear (LEAR); the commits are in docs/portals/bc.md ("Sources").
"""

from __future__ import annotations

I = "[I] the stand-in's page; no public source"   # noqa: E741 -- read as a mark
HANDLES: dict[str, str] = {
    # ---- Name Request: new request (namerequest builds it in dialogs; the pages are [I])
    "Entity type": I,
    "Name choice 1": I, "Name choice 2": I, "Name choice 3": I,
    "Continue": I,
    "Applicant name": I, "Phone": I, "Email": I,
    "#fee": I,
    "Submit Name Request": I,
    "#nr-number": I, "#nr-state": I, "#nr-name": I, "#nr-expires": I,
    "table tr:has(td)": I,
    "Continue to Payment": "[S] NR app/src/components/dialogs/confirm-name-request.vue "
                           "(#confirm-nr-continue-btn)",
    "The request with same name is already submitted.":
        "[S] NX api/namex/services/name_request/exceptions.py "
        "(NameRequestIsAlreadySubmittedError)",
    # ---- Name Request: the manage page
    "/nr/status": "[I] the path; NR app/src/router/routes.ts names it /manage",
    "NR Number": "[S] NR app/src/components/existing-request/existing-request-search.vue",
    "Applicant's Phone Number": "[S] NR existing-request-search.vue",
    "Applicant's Notification Email": "[S] NR existing-request-search.vue",
    "Retrieve Name Request": "[S] NR existing-request-search.vue (#retrieve-name-btn)",
    "No records were found that match the information you entered.":
        "[S] NR app/src/store/actions.ts (findNameRequest)",
    # ---- Incorporation
    "Start Incorporation Application": I,
    "?id=": "[S] BCU src/App.vue ($route.query.id: the temporary registration)",
    "Define Your Company": "[S] BCU src/resources/Incorporations/limitedCompany.ts",
    "Add People and Roles": "[S] BCU limitedCompany.ts",
    "Create Share Structure": "[S] BCU limitedCompany.ts",
    "Incorporation Agreement": "[S] BCU limitedCompany.ts",
    "Review and Confirm": "[S] BCU limitedCompany.ts",
    "Type of business": I, "Use an approved Name Request": I, "Numbered company": I,
    "Name Request number": I,
    "The consent letter for this conditional name has been received": I,
    "Street": I, "City": I, "Province": I, "Postal code": I,
    "First name": I, "Middle name": I, "Last name": I,
    "Completing Party": "[S] BCU (the role)", "Incorporator": "[S] BCU (the role)",
    "Director": "[S] BCU (the role)",
    "Add Person": I, "Class name": I, "Maximum number of shares (blank: no maximum)": I,
    "Add Share Class": I,
    "AGREEMENT_LABELS": "[S] BCU limitedCompany.ts (the agreement choices)",
    "#review-name": I,
    "Folio or Reference Number": "[S] BCU IncorporationReviewConfirm.vue (#folio-number)",
    "#certify-section": "[S] BCU IncorporationReviewConfirm.vue",
    "COMPLETING_PARTY_STATEMENT": "[S] BCU IncorporationReviewConfirm.vue",
    "File and Pay": "[S] BCU src/components/common/Actions.vue (filePayButtonLabel)",
    "/paybc/makepayment/": "[S] BCU Actions.vue (AUTH_WEB_URL + 'makepayment/' + token)",
    "#paybc-amount": I, "Pay": I,
    "/dashboard/": "[S] BCU Actions.vue (BUSINESS_DASH_URL + the identifier)",
    "#filing-status": "[I] the element; its values are LEAR business_model/models/filing.py "
                      "Filing.Status",
    "#legal-name": I, "#incorporation-number": I, "#certificate": I,
    "#payment-error": "[I] the element; its words: BCU src/dialogs/PaymentErrorDialog.vue",
    "Retry Payment": I,
    "T + 9": "[S] LEAR legal-api/src/legal_api/services/bootstrap.py",
}
