"""The client side of the IRS stand-in: one script that is the whole application, as the
real one is a React bundle (``portals/irs-applyein.txt`` §1-8).

Every step change is ``history.pushState`` (no document load); answers of the API render
inline in ``div[aria-live=polite]`` with an ``<h2>`` (no ``role=alert``); radios register
only through their ``<label>`` (a click on the input itself does nothing); the idle timer
shows a ``role=dialog`` modal, then routes to ``sessionExpired``; the letter is a
``data:application/pdf`` link built from the page's state. Labels marked ``[?]`` in
:mod:`portals.irs.standin_texts` are not in the extract.
"""

from __future__ import annotations

APP_JS = r"""
const C = window.IRS, T = C.texts, B = C.base;
const S = {sid: null, data: {}, result: null, busy: false};
const esc = (v) => String(v == null ? '' : v).replace(/[&<>"']/g,
  (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
const $ = (s) => document.querySelector(s);
const route = () => location.pathname.slice(B.length).replace(/^\/+|\/+$/g, '');
function go(r) { history.pushState({}, '', B + '/' + r); render(); }
window.addEventListener('popstate', render);

// ---- pieces --------------------------------------------------------------------------
function indicator(step) {
  if (!step) return '';
  const items = T.steps.map((label, i) => {
    const n = i + 1, mark = n === step ? 'active' : 'not active';
    const title = n < step ? `<a href="#" aria-label="${esc(label)} completed">${esc(label)}</a>`
      : `<div class="stepIndicator-title${n === step ? ' stepIndicator-title-active' : ''}"` +
        ` aria-hidden="true">${esc(label)}</div>`;
    return `<li class="stepIndicator-item">${title}<span class="sr-only">${esc(label)} ${mark}` +
      `</span></li>`;
  }).join('');
  return `<div class="stepIndicator-wrapper"><h2 class="stepIndicator-heading">Step ${step}of ` +
    `6: ${esc(T.steps[step - 1])}</h2><nav aria-label="Progress Tracker" role="navigation">` +
    `<ol role="list" class="stepIndicator-flexWrap">${items}</ol></nav></div>`;
}
function radios(name, legend, options, hidden, id) {
  const items = Object.entries(options).map(([v, t]) =>
    `<div class="radio"><input type="radio" id="${v}${name}id" name="${name}" value="${esc(v)}"` +
    ` tabindex="-1"><label for="${v}${name}id" data-value="${esc(v)}">${esc(t)}</label></div>`
  ).join('');
  return `<fieldset id="${id || name + '-group'}" name="${name}" data-radio="${name}"` +
    `${hidden ? ' hidden' : ''}>` +
    `<legend>${esc(legend)}</legend>${items}</fieldset>`;
}
const yesNo = (name, legend, hidden) => radios(name, legend, YES_NO, hidden);
const YES_NO = {yes: 'Yes', no: 'No'}, F = T.fields;
const SUFFIXES = Object.entries(T.suffixes);
// the closing month is asked only of these (us(entityType) in the bundle)
const CLOSING = ['CORPORATION', 'PARTNERSHIP'];
const TPD_FIELDS = ['responsibleFirstName', 'responsibleMiddleName', 'responsibleLastName',
  'responsibleSuffix', 'physicalStreet', 'physicalCity', 'physicalState', 'physicalZipCode',
  'thePhone'];
function addressFields() {
  return text('physicalStreet', 'Street') + text('physicalCity', 'City') +
    select('physicalState', 'State/U.S. territory', STATES) +
    text('physicalZipCode', 'ZIP/Postal code') + text('thePhone', 'Phone number');
}
function confirmBox() {
  return `<div class="field"><input type="checkbox" id="reviewConfirm">` +
    `<label for="reviewConfirm">Review and confirm</label></div>`;
}
function text(name, label, extra) {
  return `<div class="field"><label for="${name}">${esc(label)}</label>` +
    `<input id="${name}" name="${name}" ${extra || ''}></div>`;
}
function select(name, label, options) {
  const opts = options.map(([v, t]) => `<option value="${esc(v)}">${esc(t)}</option>`).join('');
  return `<div class="field"><label for="${name}">${esc(label)}</label><select id="${name}"` +
    ` name="${name}"><option value="">Select</option>${opts}</select></div>`;
}
const STATES = C.states.map((s) => [s, s]);
// the month selects' values are the bundle's (JANUARY ... DECEMBER), their words the month's
const MONTHS = C.months.map((m) => [m.toUpperCase(), m]);
function buttons(next) {
  const cont = C.changedSelector
    ? '<a href="#" role="button" class="btn go" aria-label="Proceed">Proceed</a>'
    : `<a href="#" role="button" class="btn go" aria-label="Continue">Continue</a>`;
  return `<div class="buttons"><a href="#" role="button" class="btn back" aria-label="Back">Back` +
    `</a>${next || cont}<a href="${B}/" class="cancel" aria-label="${esc(T.cancelAria)}">Cancel` +
    `</a></div>`;
}
function alertBox(msg, lines, list) {
  const ps = lines.map((l) => `<p>${esc(l)}</p>`).join('');
  const items = (list || []).map((l) => `<li>${esc(l)}</li>`).join('');
  const ul = items ? `<ul>${items}</ul>` : '';
  $('#alert').innerHTML = `<div class="sectionAlert sectionAlert--error"><h2>${esc(msg)}</h2>` +
    `${ul}${ps}</div>`;
}
function showAnswer(page, key, ref) {
  const [msg, lines] = T.alerts[page + '/' + key];
  alertBox(msg, lines.map((l) => l.replace('{{referenceNumber}}', ref || '')));
}
function inputErrors(errors) {
  const key = errors.length === 1 ? 'all/pageErrorInputError1' : 'all/pageErrorInputError2';
  alertBox(T.alerts[key][0].replace('{{numberOfErrors}}', errors.length), [], errors);
  return false;
}
const val = (n) => { const e = document.getElementById(n); return e ? e.value.trim() : ''; };
const choice = (n) => S.data[n] || '';

// ---- the pages -------------------------------------------------------------------------
const PAGES = {
  '': splash, applyForEin: splash,
  legalStructure: {body: () =>
    radios('legalStructureInput', F.structure, T.structures) +
    Object.entries(T.subTypes).map(([st, [name, opts]]) =>
      radios(name, F.subType, opts, true, `sub-${st}`)).join('') +
    `<div id="members-group" hidden><h3>${esc(T.llcMembers)}</h3>` +
    text('membersOfLlcInput', F.members, 'inputmode="numeric"') +
    select('stateInputControl', F.llcState, STATES) + '</div>' +
    radios('reasonForApplyingInputControl', F.reason, T.reasons) + confirmBox(),
    check: () => {
      const e = [], st = choice('legalStructureInput'), sub = T.subTypes[st];
      if (!st) e.push('Legal Structure: Selection is required.');
      if (sub && !choice(sub[0])) e.push(`${F.subType}: Selection is required.`);
      if (st === 'LLC' && !(+val('membersOfLlcInput') >= 1))
        e.push(`${F.members}: Entry is required.`);
      if (st === 'LLC' && !val('stateInputControl'))
        e.push(`${F.llcState}: Selection is required.`);
      if (!choice('reasonForApplyingInputControl'))
        e.push('Reason for applying: Selection is required.');
      if (!$('#reviewConfirm').checked) e.push(T.confirmError);
      return e.length ? inputErrors(e) : keep(['membersOfLlcInput', 'stateInputControl']);
    }, next: () => go('identityOfEntities')},
  identityOfEntities: {body: () =>
    text('responsibleFirstName', 'First name') +
    text('responsibleMiddleName', 'Middle name/initial') +
    text('responsibleLastName', 'Last name') + select('responsibleSuffix', F.suffix, SUFFIXES) +
    text('responsibleSsn', 'SSN/ITIN', 'autocomplete="off" maxlength="11" inputmode="numeric"') +
    radios('entityRoleRadioInput', F.role, {yes: T.roleYes, no: T.roleNo}),
    check: () => {
      const e = [];
      if (!val('responsibleFirstName')) e.push('First name: Entry is required.');
      if (!val('responsibleLastName')) e.push('Last name: Entry is required.');
      if (!/^\d{3}-?\d{2}-?\d{4}$/.test(val('responsibleSsn')))
        e.push('SSN/ITIN: Entry is invalid.');
      if (!choice('entityRoleRadioInput')) e.push('Responsible party: Selection is required.');
      return e.length ? inputErrors(e) : keep(['responsibleFirstName', 'responsibleMiddleName',
        'responsibleLastName', 'responsibleSuffix', 'responsibleSsn']);
    }, next: eligibility},
  // the Third Party page: the same input names as Identity's and Addresses' (the real app
  // keeps each page's answers apart: here under "tpd."); its texts are not captured
  thirdPartyEntries: {body: () =>
    radios('thirdPartyDesigneeInput', '[reconstructed] Third party designee', YES_NO) +
    radios('thirdPartyComplianceInput', '[reconstructed] Third party authorization', YES_NO,
           true) +
    `<div id="tpd-fields" hidden>` +
    text('responsibleFirstName', 'First name') +
    text('responsibleMiddleName', 'Middle name/initial') +
    text('responsibleLastName', 'Last name') + select('responsibleSuffix', F.suffix, SUFFIXES) +
    addressFields() + '</div>',
    check: () => {
      const e = ['responsibleFirstName', 'responsibleLastName', 'physicalStreet', 'physicalCity',
                 'physicalState', 'physicalZipCode', 'thePhone']
        .filter((n) => !val(n)).map((n) => `${n}: Entry is required.`);
      if (choice('thirdPartyDesigneeInput') !== 'yes' ||
          choice('thirdPartyComplianceInput') !== 'yes')
        e.push('Third party: Selection is required.');
      return e.length ? inputErrors(e) : keep(TPD_FIELDS, 'tpd.');
    }, next: () => go('addAddresses')},
  addAddresses: {body: () =>
    addressFields() + radios('otherAddress', F.otherAddress, YES_NO),
    check: () => {
      const e = ['physicalStreet', 'physicalCity', 'physicalState', 'thePhone']
        .filter((n) => !val(n)).map((n) => `${n}: Entry is required.`);
      if (!/^\d{5}(-?\d{4})?$/.test(val('physicalZipCode'))) e.push('ZIP code: Entry is invalid.');
      if (!choice('otherAddress')) e.push('Mailing address: Selection is required.');
      return e.length ? inputErrors(e) : keep(['physicalStreet', 'physicalCity', 'physicalState',
        'physicalZipCode', 'thePhone']);
    }, next: () => go('additionalDetails')},  // no verifyAddresses: the real app goes on
  additionalDetails: {body: () => {
    const st = S.data.legalStructureInput;
    return text('legalNameInput', 'Legal name') +
      text('dbaNameInput', 'Trade name/Doing business as (only if different from legal name)') +
      text('countyInput', F.county) + select('stateInput', F.stateLocation, STATES) +
      (st === 'LLC' ? select('StateFiledArticlesOrganizationInput', F.articlesOrganization,
                             STATES) : '') +
      (st === 'CORPORATION' ? select('StateFiledArticlesIncorporationInput',
                                     F.articlesIncorporation, STATES) : '') +
      select('startDateMonthInput', 'Month', MONTHS) +
      text('startDateYearInput', 'Year', 'inputmode="numeric"') +
      (CLOSING.includes(st)
        ? select('ClosingMonthOfAccountingInput', F.closingMonth, MONTHS) : '') +
      radios('highwayVehiclesInput', F.highway, YES_NO) +
      radios('gamblingWagerInput', F.gambling, YES_NO) +
      radios('fileForm720Input', F.form720, YES_NO) + radios('atfInput', F.atf, YES_NO) +
      radios('hasEmployeesInput', F.employees, YES_NO) + confirmBox(); },
    check: () => {
      const st = S.data.legalStructureInput;
      const need = ['legalNameInput', 'stateInput', 'startDateMonthInput'];
      if (st === 'LLC') need.push('StateFiledArticlesOrganizationInput');
      if (st === 'CORPORATION') need.push('StateFiledArticlesIncorporationInput');
      if (CLOSING.includes(st)) need.push('ClosingMonthOfAccountingInput');
      const e = need.filter((n) => !val(n)).map((n) => `${n}: Entry is required.`);
      if (!/^\d{4}$/.test(val('startDateYearInput'))) e.push('Year: Entry is invalid.');
      for (const n of ['highwayVehiclesInput', 'gamblingWagerInput', 'fileForm720Input',
                       'atfInput', 'hasEmployeesInput'])
        if (!choice(n)) e.push(`${n}: Selection is required.`);
      if (choice('hasEmployeesInput') === 'yes')
        e.push('[stand-in] the employee questions are not modelled');
      if (!$('#reviewConfirm').checked) e.push(T.confirmError);
      return e.length ? inputErrors(e) : keep(['legalNameInput', 'dbaNameInput', 'countyInput',
        'stateInput', 'StateFiledArticlesOrganizationInput',
        'StateFiledArticlesIncorporationInput', 'startDateMonthInput', 'startDateYearInput',
        'ClosingMonthOfAccountingInput']);
    }, next: () => go('activityAndServices')},
  // its texts (ein__activityAndServices) are not captured: the values are the bundle's
  activityAndServices: {body: () =>
    radios('entityBusinessCategoryInput', '[reconstructed] Business category',
           Object.fromEntries(C.categories.map((v) => [v, `[reconstructed] ${v}`]))) +
    radios('otherInput', '[reconstructed] Other activity',
           {GOODS_SELLER: '[reconstructed] GOODS_SELLER', SERVICE: '[reconstructed] SERVICE',
            OTHER: '[reconstructed] OTHER'}, true) +
    `<div id="other-text" hidden>` +
    text('otherActivityTextInput', '[reconstructed] Describe the activity') + '</div>',
    check: () => {
      const e = [];
      if (!choice('entityBusinessCategoryInput'))
        e.push('Business category: Selection is required.');
      else if (choice('entityBusinessCategoryInput') !== 'OTHER' ||
               choice('otherInput') !== 'OTHER')
        e.push('[stand-in] only OTHER / OTHER is modelled');
      if (!val('otherActivityTextInput')) e.push('Principal activity: Entry is required.');
      return e.length ? inputErrors(e) : keep(['otherActivityTextInput']);
    }, next: () => go('reviewAndSubmit')},
  reviewAndSubmit: {body: review, check: () => true, next: submit},
  einAssignment: {body: assignment},
  thankYou: {body: () => '<p>Thank you for using Apply for EIN.</p>'},
  sessionExpired: {body: () => '<p>Your session has expired due to inactivity. You must start' +
    ' a new application; it cannot be saved.</p>'},
  serviceUnavailable: {body: () => '<p>We are unable to process your request at this time.' +
    ' Please try again later.</p>'},
};
function keep(names, prefix) {
  for (const n of names) S.data[(prefix || '') + n] = val(n);
  return true;
}

function splash() {
  return `<p>Apply for an Employer Identification Number (EIN) online. You must complete this` +
    ` application in one session; it cannot be saved.</p><a href="${B}/legalStructure"` +
    ` id="begin">Begin Application Now</a>`;
}
function rows() {
  const d = S.data, who = [d.responsibleFirstName, d.responsibleMiddleName,
                           d.responsibleLastName, d.responsibleSuffix].filter(Boolean).join(' ');
  const subOf = T.subTypes[d.legalStructureInput];
  const sub = subOf && d[subOf[0]] && d.legalStructureInput !== 'SOLE_PROPRIETOR'
    ? subOf[1][d[subOf[0]]] : '';
  const out = [
    ['Legal structure', T.structures[d.legalStructureInput] + (sub ? ': ' + sub : '')],
    ['Reason for applying', T.reasons[d.reasonForApplyingInputControl]],
    ['Responsible party', who],
    ['SSN/ITIN', 'XXX-XX-' + d.responsibleSsn.slice(-4)],
    ['Physical address',
     `${d.physicalStreet}, ${d.physicalCity}, ${d.physicalState} ${d.physicalZipCode}`],
    ['Phone number', d.thePhone],
    ['Legal name', d.legalNameInput],
    ['Start date', `${(MONTHS.find(([v]) => v === d.startDateMonthInput) || ['', ''])[1]} ` +
     `${d.startDateYearInput}`],
    [C.reviewChanged === 'label' ? 'Principal business activity' : 'Principal activity',
     d.otherActivityTextInput]];
  if (d.entityRoleRadioInput === 'no')
    out.push(['Third party designee', [d['tpd.responsibleFirstName'],
      d['tpd.responsibleMiddleName'], d['tpd.responsibleLastName']].filter(Boolean).join(' ')]);
  return out;
}
function review() {
  const dl = rows().map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`).join('');
  // a redesign (the reviewChanged fault): a question the application now requires
  const extra = C.reviewChanged === 'field'
    ? yesNo('signatureAuthorityInput', 'Are you authorized to sign this application?') : '';
  // the real review renders the letter choice only when the responsible party applies: a
  // designee's application sends letterDelivery "MAIL" (tests/facts/irs-ein-assignment.txt §5)
  const tpd = S.data.entityRoleRadioInput === 'no';
  return `<dl class="review">${dl}</dl>` + extra + (tpd ? '' :
    radios('confirmationLetterRadioInput', 'Confirmation Letter',
           {DIGITAL: T.letterDigital, MAIL: T.letterMail})) +
    `<p>${esc(T.submitInstructions)}</p>`;
}
// the EIN Assignment route as the real bundle renders it (tests/facts/irs-ein-assignment.txt):
// the EIN, legal name and name control in the summary-table component, then the application's
// own summary in the same component (which has a "Legal name" row too); buttons are
// role=button anchors told apart by their aria-label only
function summaryTable(header, groups) {
  return `<div class="summaryInfoTable "><h3>${esc(header)}</h3>` + groups.map(([title, rows]) =>
    `<div class="summary-information-table-component"><h3>${esc(title)}</h3><table><tbody>` +
    rows.map(([k, v]) => `<tr><td><b>${esc(k)}</b></td><td>${v}<br></td></tr>`).join('') +
    '</tbody></table></div>').join('') + '</div>';
}
function irsButton(label, aria, extra) {
  return `<a href="" role="button" class="irs-button irs-button--active${extra || ''}"` +
    ` id="anchor-ui-0" aria-label="${esc(aria || label)}">${esc(label)}</a>`;
}
function assignment() {
  const r = S.result, d = S.data, tpd = d.entityRoleRadioInput === 'no';
  const b = (v) => `<b>${esc(v)}</b>`;
  const rows = [['EIN assigned', b(r.ein)]];
  if (r.legalName) rows.push(['Legal name', b(String(r.legalName).toUpperCase())]);
  rows.push(['Name control', b(String(r.nameControl || '').toUpperCase())]);
  if (r.confirmationLetter && !tpd)
    rows.push(['Confirmation letter', `<span>${esc(T.digitalNote)}</span>` +
               irsButton(T.download)]);
  const who = [d.responsibleFirstName, d.responsibleMiddleName, d.responsibleLastName]
    .filter(Boolean).join(' ').toUpperCase();
  const print = irsButton('Print Page', 'Print Page', ' inverted') +
    '<a href="https://www.irs.gov/businesses/employer-identification-number" aria-label="click' +
    ' for Help with saving and printing your letter. open in new window">Help with saving and' +
    ' printing your letter</a>';
  return `<section><h2>EIN Assignment</h2></section><div class="fixSectionAlert">` +
    `<div class="sectionAlert sectionAlert--success" tabindex="0"><h2>${esc(T.congratulations)}` +
    `</h2><ul><li>${esc(T.savePrint)}</li></ul></div></div><div>${print}</div>` +
    summaryTable(tpd ? 'The EIN' : 'Your EIN', [[tpd ? 'The EIN Details' : 'Your EIN Details',
                                                  rows]]) +
    (r.confirmationLetter ? '' : `<p>${esc(tpd ? T.mailNoteDesignee : T.mailNote)}</p>`) +
    // [reconstructed] the group titles' organisation label comes from the uncaptured
    // `shared` namespace; the rows are a subset of the real summary's
    summaryTable('Summary of your information', [
      ['Legal Structure', [['Organization Type', esc(
        String(T.structures[d.legalStructureInput] || '').toUpperCase())]]],
      ['Entity Information', [['Legal name', esc(String(d.legalNameInput).toUpperCase())]]],
      ['Responsible Party', [['Name', esc(who)],
                             ['SSN/ITIN', esc('XXX-XX-' + d.responsibleSsn.slice(-4))]]]]) +
    `<div>${print}</div><div>${irsButton('Exit Application')}<br>` +
    `${irsButton('Apply for another EIN')}</div>`;
}

// ---- the API (the real app: X-IRS-Session-Id, 90 s timeout, a timeout or network error is
// recorded as httpStatus 500) ---------------------------------------------------------------
async function api(path, body) {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), C.appTimeoutMs);
  try {
    const resp = await fetch(`${B}/api/${path}`, {method: 'POST', signal: abort.signal,
      headers: {'Content-Type': 'application/json', 'X-IRS-Session-Id': S.sid || ''},
      body: JSON.stringify(body || {})});
    let json = {};
    try { json = await resp.json(); } catch (e) { json = {}; }
    return {status: resp.status, json};
  } catch (e) {
    return {status: 500, json: {}};
  } finally { clearTimeout(timer); }
}
function identityKey(st, ref) {
  if (st === 400 && ref === 'SameTinDeceased') return 'pageErrorSameTinDeceased';
  if (st === 400 && ref === 'SameTinProtected') return 'pageErrorSameTinProtected';
  if (st === 400 && ref === '112') return 'pageError400Ref112';
  if (st === 401 && ['102', '115', '101'].includes(ref)) return 'pageError401Ref' + ref;
  if (st === 429 && ['114', '105'].includes(ref)) return 'pageError429Ref' + ref;
  return [500, 400, 401, 429].includes(st) ? 'pageError500' : null;
}
function submitKey(st, ref) {
  if (st === 400 && ref === '112') return 'pageError400Ref112';
  if (st === 401 && ['103', '112'].includes(ref)) return 'pageError401Ref' + ref;
  if (st === 403 && ref === '101') return 'pageError403Ref101';
  if (st === 429 && ['101', '114'].includes(ref)) return 'pageError429Ref' + ref;
  return [400, 401, 403, 429, 500].includes(st) ? 'pageError500' : null;
}
async function eligibility() {
  const d = S.data;
  const {status, json} = await api('eligibility', {ssn: d.responsibleSsn,
    firstName: d.responsibleFirstName, lastName: d.responsibleLastName,
    responsibleParty: d.entityRoleRadioInput === 'yes'});
  if (status === 200 && json.eligibilityToken) {
    S.token = json.eligibilityToken;
    return go(d.entityRoleRadioInput === 'yes' ? 'addAddresses' : 'thirdPartyEntries');
  }
  const key = identityKey(status, json.ref);
  if (key) return showAnswer('identity', key, json.ref);
  go('serviceUnavailable');
}
async function submit() {
  if (S.data.entityRoleRadioInput !== 'no' && !choice('confirmationLetterRadioInput'))
    return inputErrors([T.letterRequired]);
  if (C.reviewChanged === 'field' && !choice('signatureAuthorityInput'))
    return inputErrors(['Please answer: are you authorized to sign this application?']);
  $('#progress').hidden = false;
  const {status, json} = await api('application', {token: S.token, data: S.data});
  $('#progress').hidden = true;
  if (status === 200 && json.einResult) { S.result = json.einResult; return go('einAssignment'); }
  const key = submitKey(status, json.ref);
  if (key) return showAnswer('reviewAndSubmit', key, json.ref);
  go('serviceUnavailable');
}

// ---- rendering and events --------------------------------------------------------------
const OPEN = ['', 'applyForEin', 'thankYou', 'sessionExpired', 'serviceUnavailable'];
function render() {
  let r = route();
  if (!(r in T.routes)) r = '';
  if (!OPEN.includes(r) && !S.sid) { history.replaceState({}, '', B + '/'); r = ''; }
  if (r === 'einAssignment' && !S.result) { history.replaceState({}, '', B + '/'); r = ''; }
  const [title, step] = T.routes[r], page = PAGES[r];
  document.title = title;
  const body = typeof page === 'function' ? page() : page.body();
  const form = page.check ? buttons(r === 'reviewAndSubmit'
    ? `<button type="button" class="btn submit" aria-label="${esc(T.submit)}">${esc(T.submit)}` +
      `</button>` : '') : '';
  $('#root').innerHTML = `${indicator(step)}<h1>${esc(title)}</h1><div aria-live="polite"` +
    ` class="fixSectionAlert" id="alert"></div><form onsubmit="return false">${body}</form>` +
    `<div id="progress" role="progressbar" hidden>Please wait while your application is being` +
    ` processed.</div>${form}`;
  // a step revisited shows what was entered (the Third Party page its own answers)
  const prefix = r === 'thirdPartyEntries' ? 'tpd.' : '';
  document.querySelectorAll('#root input:not([type=radio]):not([type=checkbox]), #root select')
    .forEach((e) => { const v = S.data[prefix + e.id]; if (v !== undefined) e.value = v; });
  document.querySelectorAll('[data-radio]').forEach((g) => {
    const name = g.dataset.radio;
    g.querySelectorAll('input').forEach((i) => { i.checked = S.data[name] === i.value; });
  });
  reveal();
  window.scrollTo(0, 0);
}
function reveal() {  // the dependent questions, shown once their answer is given
  const d = S.data, st = d.legalStructureInput;
  const show = (id, on) => { const e = document.getElementById(id); if (e) e.hidden = !on; };
  for (const s of Object.keys(T.subTypes)) show(`sub-${s}`, st === s);
  show('members-group', st === 'LLC');
  show('thirdPartyComplianceInput-group', d.thirdPartyDesigneeInput === 'yes');
  show('tpd-fields', d.thirdPartyDesigneeInput === 'yes' && d.thirdPartyComplianceInput === 'yes');
  show('otherInput-group', d.entityBusinessCategoryInput === 'OTHER');
  show('other-text', d.entityBusinessCategoryInput === 'OTHER' && d.otherInput === 'OTHER');
}
document.addEventListener('click', async (ev) => {
  const t = ev.target;
  const label = t.closest('[data-radio] label');
  if (label) {  // the real app listens on the label: a click on the input is not a choice
    ev.preventDefault();
    const name = label.closest('[data-radio]').dataset.radio;
    S.data[name] = label.dataset.value;
    label.closest('[data-radio]').querySelectorAll('input').forEach(
      (i) => { i.checked = i.value === label.dataset.value; });
    if (name === 'legalStructureInput')
      for (const [sub] of Object.values(T.subTypes)) delete S.data[sub];
    reveal();
    return;
  }
  if (t.matches('input[type=radio]')) { ev.preventDefault(); return; }
  if (t.id === 'begin') { ev.preventDefault(); return begin(); }
  const button = t.closest('a.irs-button');
  if (button) {  // the real buttons: anchors, one id for all, told apart by aria-label
    ev.preventDefault();
    const aria = button.getAttribute('aria-label');
    if (aria === T.download) return letter();
    if (aria === 'Exit Application') return go('thankYou');
    if (aria === 'Apply for another EIN') {
      S.data = {}; S.result = null; return go('legalStructure'); }
    return;
  }
  if (t.closest('.back')) { ev.preventDefault(); return history.back(); }
  const act = t.closest('a.go, button.submit');
  if (!act) return;
  ev.preventDefault();
  if (S.busy || !CONFIRM()) return;
  const page = PAGES[route()];
  $('#alert').innerHTML = '';
  if (!page.check()) return;
  S.busy = true;
  try { await page.next(); } finally { S.busy = false; }
});
async function begin() {
  const {status, json} = await api('session');
  if (status !== 200 || !json.sessionId) return go('serviceUnavailable');
  S.sid = json.sessionId; S.data = {}; S.result = null;
  go('legalStructure'); idle();
}
function letter() {
  const l = S.result.confirmationLetter, a = document.createElement('a');
  a.href = 'data:application/pdf;base64,' + l.content;
  a.download = l.letterType + '.pdf';
  document.body.appendChild(a); a.click(); a.remove();
}

// ---- the idle timer: modal after C.idleMs, sessionExpired C.countdownMs later --------------
let idleTimer = null, tick = null;
function idle() {
  clearTimeout(idleTimer);
  if (!S.sid || document.querySelector('.timeout-modal')) return;
  idleTimer = setTimeout(modal, C.idleMs);
}
function modal() {
  const end = Date.now() + C.countdownMs, box = document.createElement('div');
  box.className = 'timeout-modal timeout-modal--active';
  box.setAttribute('role', 'dialog'); box.setAttribute('aria-modal', 'true');
  box.innerHTML = `<h2>${esc(T.moreTime)}</h2><p class="left"></p>` +
    `<button type="button" class="stay">Continue Session</button>`;  // [?] button label
  document.body.appendChild(box);
  const show = () => {
    const s = Math.max(0, Math.ceil((end - Date.now()) / 1000));
    box.querySelector('.left').textContent = T.expiresIn.replace(
      '{time}', `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`);
    if (s <= 0) { clearInterval(tick); box.remove(); S.sid = null; go('sessionExpired'); }
  };
  show(); tick = setInterval(show, 250);
  box.querySelector('.stay').addEventListener('click', async (ev) => {
    ev.stopPropagation(); clearInterval(tick); box.remove(); await api('keepalive'); idle();
  });
}
['click', 'keydown'].forEach((e) => document.addEventListener(e, idle, true));
render();
"""
