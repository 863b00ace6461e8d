"""The page of the Delaware stand-in's eCorp2 e-filing service: one Angular-like page whose
steps (form -> confirmation dialog -> payment -> answer) change without a document load.

Sourced (docs/portals/delaware.md, source D1): the ``formcontrolname`` of each control
and the option values, the file input, "Continue", the Kendo dialog (``.k-dialog``, its
``.k-primary``), the payment type select (CREDITCARD | ACH), the submit
``button[type=submit].btn-primary``, "Your request has been successfully submitted" and the
``table.table-borderless`` row "Service Request Number:". Not in the sources, marked [?]:
the labels' exact words, the dialog's text, the app's API route and answers, how a failed
request is shown, the card fields' names.
"""

from __future__ import annotations

from portalq.portals.standin.kit.html import esc

PRIORITIES = {"_1HourService": "1 Hour Service", "_2HourService": "2 Hour Service",
              "SameDayService": "Same Day Service", "_24HourService": "24 Hour Service",
              "NormalProcessing": "Normal Processing"}
REQUEST_TYPES = {"documentFilingRequest": "Document Filing Request",
                 "certificateRequest": "Certificate Request"}
RETURN_METHODS = {"RegularMail": "Regular Mail", "Email": "Email"}  # [?] only RegularMail seen
PAYMENT_TYPES = {"CREDITCARD": "Credit Card", "ACH": "ACH"}


def _select(label: str, name: str, options: dict[str, str]) -> str:
    opts = "".join(f'<option value="{esc(k)}">{esc(v)}</option>' for k, v in options.items())
    return (f'<div class=form-group><label for="{name}">{esc(label)}</label><select id="{name}" '
            f'formcontrolname="{name}"><option value="">-- Select --</option>{opts}</select>'
            "</div>")


def _input(label: str, name: str, kind: str = "text", extra: str = "") -> str:
    return (f'<div class=form-group><label for="{name}">{esc(label)}</label><input id="{name}" '
            f'type="{kind}" formcontrolname="{name}"{extra}></div>')


def page_body(continue_label: str) -> str:
    # labels [?]: the sources give the controls, not their visible words
    form = (_select("Priority", "workFlowPriority", PRIORITIES)
            + _select("Request Type", "documentUploadRequestType", REQUEST_TYPES)
            + _select("Return Method", "returnMethod", RETURN_METHODS)
            + _input("Corporation Name", "corporationName")
            + _input("Document Type", "documentType")
            + '<div class=form-group><label for="document">Document (PDF)</label>'
              '<input id="document" type="file" accept="application/pdf"></div>')
    payment = (_select("Payment Type", "paymentType", PAYMENT_TYPES)
               + _input("Name on Card", "cardName")
               # data-sensitive: the stand-in's mark that screenshots must mask it [?]
               + _input("Card Number", "cardNumber", extra=" data-sensitive")
               + _input("Expiration (MM/YY)", "cardExpiry", extra=" data-sensitive")
               + _input("Billing Address", "address")
               + '<div class=form-group><label for="phone">Phone</label><kendo-maskedtextbox>'
                 '<input id="phone" formcontrolname="phone"></kendo-maskedtextbox></div>')
    return (
        '<app-root><h1>Document Filing and Certificate Request Service</h1>'
        '<div id=alert class="alert alert-danger" hidden></div>'
        f'<form id=filing onsubmit="return false">{form}'
        f'<button type=button class="btn btn-primary" id=go>{esc(continue_label)}</button>'
        '</form>'
        '<div class=k-dialog role=dialog hidden><div class=k-dialog-title>Confirm</div>'
        '<p>Please confirm that the document is ready to be submitted.</p>'  # [?] words
        '<button type=button class="k-button k-primary">Yes</button>'
        '<button type=button class="k-button" id=no>No</button></div>'
        f'<form id=payment hidden onsubmit="return false"><h2>Payment</h2>{payment}'
        '<button type=submit class="btn btn-primary">Submit</button></form>'
        '<section id=result hidden><p class=success>Your request has been successfully '
        'submitted</p><table class=table-borderless><tr><td>Service Request Number:</td>'
        '<td id=srn></td></tr></table></section></app-root>')


# the app: Continue checks the form and opens the dialog; Yes shows payment (a route change,
# no load); Submit sends form, document and payment in one request [?] and shows the answer
SCRIPT = """
const $ = (s) => document.querySelector(s);
const val = (n) => $(`[formcontrolname=${n}]`).value.trim();
const FORM = ['workFlowPriority', 'documentUploadRequestType', 'returnMethod',
              'corporationName', 'documentType'];
const PAY = ['paymentType', 'cardName', 'cardNumber', 'cardExpiry', 'address', 'phone'];
// like an *ngIf alert: an alert only while it says something
const alertBox = (text) => {
  const a = $('#alert'); a.textContent = text; a.hidden = !text;
  if (text) a.setAttribute('role', 'alert'); else a.removeAttribute('role');
};
$('#go').addEventListener('click', () => {
  const missing = FORM.filter((n) => !val(n));
  if (!$('#document').files.length) missing.push('document');
  if (missing.length) { alertBox('Required: ' + missing.join(', ')); return; }
  if (!CONFIRM()) return;
  alertBox(''); $('.k-dialog').hidden = false;
});
$('#no').addEventListener('click', () => { $('.k-dialog').hidden = true; });
$('.k-dialog .k-primary').addEventListener('click', () => {
  $('.k-dialog').hidden = true; $('#filing').hidden = true; $('#payment').hidden = false;
  history.pushState({}, '', location.pathname.replace(/e-filing$/, 'payment'));
});
$('#payment').addEventListener('submit', async () => {
  const missing = PAY.filter((n) => !val(n));
  if (missing.length) { alertBox('Required: ' + missing.join(', ')); return; }
  const body = new FormData();
  for (const n of FORM.concat(PAY)) body.append(n, val(n));
  body.append('document', $('#document').files[0]);
  $('#payment button[type=submit]').disabled = true;
  let answer;
  try {
    const r = await fetch(API, {method: 'POST', body, credentials: 'same-origin'});
    answer = await r.json();
  } catch (e) {   // [?] how the real app shows a failed request
    alertBox('An error occurred while processing your request. Please try again later.');
    return;
  }
  if (answer.serviceRequestNumber) {
    $('#payment').hidden = true; $('#srn').textContent = answer.serviceRequestNumber;
    $('#result').hidden = false;
    history.pushState({}, '', location.pathname.replace(/payment$/, 'confirmation'));
  } else {
    alertBox(answer.message || 'An error occurred while processing your request.');
  }
});
"""
