// A SAML 2.0 identity provider for the test suite: samlify's
// IdentityProvider on 127.0.0.1 (it reads the service's metadata, checks a
// signed sign-in request, signs the assertion), with a sign-in form of its
// own and the known attacks on a service provider, chosen with POST /__mode,
// so that the service can be seen to refuse each.
//
//   node saml.mjs <port> <keys dir>
//
// The keys dir holds idp.key/idp.pem (the provider's signing pair, the
// certificate the service trusts) and stranger.key/stranger.pem (a pair it
// does not). POST /__sp {metadata_url} names the service's metadata.
// Accounts: the login is the address; any password but "wrong" is accepted.
// Prints "ready <base>" once listening.

import http from 'node:http';
import { readForm } from './forms.mjs';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { inflateRawSync } from 'node:zlib';
import * as samlify from 'samlify';
import { DOMParser, XMLSerializer } from '@xmldom/xmldom';

const port = Number(process.argv[2]);
const keys = process.argv[3];
const base = `http://127.0.0.1:${port}`;
const entityID = `${base}/metadata`;
const EMAIL = 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress';
const REDIRECT = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect';

const accounts = {
  'alice@acme.test': { name: 'Alice Admin', groups: ['agon-admins', 'staff'] },
  'bob@acme.test': { name: 'Bob Builder', groups: ['staff'] },
  'carol@acme.test': { name: 'Carol Contractor', groups: [] },
  'mallory@evil.test': { name: 'Mallory', groups: ['staff'] },
};

// Requests are checked by samlify against the service's metadata; the
// schema check needs Java, so it is left to the parsers on both sides.
samlify.setSchemaValidator({ validate: () => Promise.resolve('skipped') });

// It wants signed requests when the service says it signs them.
function provider(name, wantSigned, algorithm = 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256') {
  return samlify.IdentityProvider({
    entityID,
    wantAuthnRequestsSigned: wantSigned,
    privateKey: readFileSync(`${keys}/${name}.key`),
    signingCert: readFileSync(`${keys}/${name}.pem`),
    nameIDFormat: [EMAIL],
    requestSignatureAlgorithm: algorithm,
    singleSignOnService: [{ Binding: REDIRECT, Location: `${base}/sso` }],
    singleLogoutService: [{ Binding: REDIRECT, Location: `${base}/slo` }],
  });
}

let idp = provider('idp', false);
let stranger = provider('stranger', false);
// The right key, a broken digest: SHA-1 signatures can be forged.
let sha1 = provider('idp', false, 'http://www.w3.org/2000/09/xmldsig#rsa-sha1');
let sp = null;
// The same service, to send it a logout request unsigned.
let unsignedSp = null;
let mode = 'normal';
let lastAssertionId = null;
const logouts = [];

const id = () => `_${randomBytes(16).toString('hex')}`;
const escape = (text) => String(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

// The response, before signing; `mode` bends it.
function response({ requestId, login, acs, audience }) {
  const now = new Date();
  let issued = now.toISOString();
  let later = new Date(now.getTime() + 5 * 60_000).toISOString();
  if (mode === 'expired') {
    issued = new Date(now.getTime() - 2 * 3_600_000).toISOString();
    later = new Date(now.getTime() - 3_600_000).toISOString();
  }
  const account = accounts[login];
  let nameId = escape(login);
  // A provider that lets people pick addresses signs this; canonical XML
  // drops the comment, a careless parser stops at it.
  if (mode === 'comment') nameId = 'alice@acme.test<!---->.evil.test';
  const assertionId = mode === 'replay_id' && lastAssertionId ? lastAssertionId : id();
  lastAssertionId = assertionId;
  const restriction = mode === 'no_audience' ? '' :
    `<saml:AudienceRestriction><saml:Audience>${escape(mode === 'wrong_audience' ? 'https://someone-else.example/saml' : audience)}</saml:Audience></saml:AudienceRestriction>`;
  const groups = account.groups.map((g) => `<saml:AttributeValue>${escape(g)}</saml:AttributeValue>`).join('');
  return `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="${id()}" Version="2.0" IssueInstant="${issued}" Destination="${escape(acs)}" InResponseTo="${escape(requestId)}">` +
    `<saml:Issuer>${escape(entityID)}</saml:Issuer>` +
    '<samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status>' +
    `<saml:Assertion ID="${assertionId}" Version="2.0" IssueInstant="${issued}">` +
    `<saml:Issuer>${escape(entityID)}</saml:Issuer>` +
    `<saml:Subject><saml:NameID Format="${EMAIL}">${nameId}</saml:NameID>` +
    `<saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer"><saml:SubjectConfirmationData NotOnOrAfter="${later}" Recipient="${escape(acs)}" InResponseTo="${escape(requestId)}"/></saml:SubjectConfirmation></saml:Subject>` +
    `<saml:Conditions NotBefore="${issued}" NotOnOrAfter="${later}">${restriction}</saml:Conditions>` +
    `<saml:AuthnStatement AuthnInstant="${issued}" SessionIndex="${id()}"><saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>` +
    `<saml:AttributeStatement><saml:Attribute Name="name"><saml:AttributeValue>${escape(account.name)}</saml:AttributeValue></saml:Attribute>` +
    `<saml:Attribute Name="groups">${groups}</saml:Attribute></saml:AttributeStatement>` +
    '</saml:Assertion></samlp:Response>';
}

// What an attacker does to a response signed for them (mallory) so that a
// careless service provider reads alice: the classic signature wrappings.
function wrap(xml, inside) {
  const doc = new DOMParser().parseFromString(xml, 'text/xml');
  const signed = doc.getElementsByTagNameNS('urn:oasis:names:tc:SAML:2.0:assertion', 'Assertion')[0];
  const evil = signed.cloneNode(true);
  evil.setAttribute('ID', id());
  for (const sig of Array.from(evil.getElementsByTagNameNS('http://www.w3.org/2000/09/xmldsig#', 'Signature'))) {
    sig.parentNode.removeChild(sig);
  }
  evil.getElementsByTagNameNS('urn:oasis:names:tc:SAML:2.0:assertion', 'NameID')[0].textContent = 'alice@acme.test';
  if (inside) {
    // The signed assertion hidden inside the forged one.
    signed.parentNode.replaceChild(evil, signed);
    evil.getElementsByTagNameNS('urn:oasis:names:tc:SAML:2.0:assertion', 'Subject')[0].appendChild(signed);
  } else {
    signed.parentNode.insertBefore(evil, signed);
  }
  return new XMLSerializer().serializeToString(doc);
}

async function signedResponse(requestId, login, relayState) {
  const acs = sp.entityMeta.getAssertionConsumerService('post');
  const audience = sp.entityMeta.getEntityID();
  const xml = response({ requestId, login, acs, audience });
  const signer = { wrong_cert: stranger, sha1 }[mode] || idp;
  const made = await signer.createLoginResponse(sp, { extract: { request: { id: requestId } } }, 'post',
    { email: login }, { customTagReplacement: () => ({ id: id(), context: xml }), relayState });
  let out = Buffer.from(made.context, 'base64').toString('utf8');
  if (mode === 'unsigned') {
    out = out.replace(/<ds:Signature[\s\S]*?<\/ds:Signature>/g, '');
  } else if (mode === 'wrapped' || mode === 'wrapped_inside') {
    out = wrap(out, mode === 'wrapped_inside');
  } else if (mode === 'doctype') {
    // An entity declaration ahead of a validly signed response (XXE,
    // entity expansion).
    out = out.replace(/^(<\?xml[^>]*\?>)?/, '$1<!DOCTYPE r [<!ENTITY who "alice@acme.test">]>');
  }
  return { acs, samlResponse: Buffer.from(out, 'utf8').toString('base64') };
}

function page(body) {
  return `<!doctype html><html><head><title>Test SAML IdP</title></head><body>${body}</body></html>`;
}

// The signed part of a redirect binding's query, as sent (SAML bindings §3.4.4.1).
function octetString(rawQuery) {
  const parts = Object.fromEntries(rawQuery.split('&').map((p) => [p.split('=')[0], p]));
  return ['SAMLRequest', 'SAMLResponse', 'RelayState', 'SigAlg'].filter((k) => parts[k]).map((k) => parts[k]).join('&');
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, base);
  try {
    if (req.method === 'POST' && url.pathname === '/__mode') {
      mode = (await readForm(req)).get('mode') || 'normal';
      res.writeHead(200, { 'content-type': 'text/plain' }).end(mode);
    } else if (req.method === 'POST' && url.pathname === '/__sp') {
      const metadata = await (await fetch((await readForm(req)).get('metadata_url'))).text();
      sp = samlify.ServiceProvider({ metadata, wantLogoutRequestSigned: true });
      unsignedSp = samlify.ServiceProvider({ metadata });
      idp = provider('idp', sp.entityMeta.isAuthnRequestSigned());
      stranger = provider('stranger', sp.entityMeta.isAuthnRequestSigned());
      sha1 = provider('idp', sp.entityMeta.isAuthnRequestSigned(), 'http://www.w3.org/2000/09/xmldsig#rsa-sha1');
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    } else if (req.method === 'GET' && url.pathname === '/__logouts') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(logouts));
    } else if (req.method === 'GET' && url.pathname === '/sso') {
      const query = Object.fromEntries(url.searchParams);
      const parsed = await idp.parseLoginRequest(sp, 'redirect', { query, octetString: octetString(url.search.slice(1)) });
      const requestId = parsed.extract.request.id;
      res.writeHead(200, { 'content-type': 'text/html' }).end(page(
        '<form method="post" action="/login">' +
        `<input type="hidden" name="request_id" value="${escape(requestId)}">` +
        `<input type="hidden" name="RelayState" value="${escape(query.RelayState || '')}">` +
        '<input name="login" autocomplete="username"><input name="password" type="password">' +
        '<button type="submit">Sign in</button></form>'));
    } else if (req.method === 'POST' && url.pathname === '/login') {
      const form = await readForm(req);
      const login = form.get('login');
      if (!accounts[login] || form.get('password') === 'wrong') {
        res.writeHead(403, { 'content-type': 'text/plain' }).end('Unknown user or wrong password');
        return;
      }
      const relayState = form.get('RelayState');
      const { acs, samlResponse } = await signedResponse(form.get('request_id'), login, relayState);
      res.writeHead(200, { 'content-type': 'text/html' }).end(page(
        `<form method="post" action="${escape(acs)}">` +
        `<input type="hidden" name="SAMLResponse" value="${samlResponse}">` +
        `<input type="hidden" name="RelayState" value="${escape(relayState)}">` +
        '<noscript><button type="submit">Continue</button></noscript></form>' +
        '<script>document.forms[0].submit()</script>'));
    } else if (req.method === 'GET' && url.pathname === '/__logout') {
      // Signs a user out everywhere (IdP-initiated single logout): the
      // address of the service's logout service with a logout request.
      const target = url.searchParams.get('unsigned') ? unsignedSp : sp;
      const made = idp.createLogoutRequest(target, 'redirect', { logoutNameID: url.searchParams.get('name_id') }, 'after-logout');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: made.id, url: made.context }));
    } else if (req.method === 'GET' && url.pathname === '/slo' && url.searchParams.get('SAMLResponse')) {
      // The service's answer to a logout request of ours.
      const xml = inflateRawSync(Buffer.from(url.searchParams.get('SAMLResponse'), 'base64')).toString('utf8');
      logouts.push({
        response: true,
        in_response_to: (xml.match(/InResponseTo="([^"]*)"/) || [])[1],
        status: (xml.match(/StatusCode Value="([^"]*)"/) || [])[1],
        relay_state: url.searchParams.get('RelayState'),
      });
      res.writeHead(200, { 'content-type': 'text/html' }).end(page('<p>Signed out everywhere.</p>'));
    } else if (req.method === 'GET' && url.pathname === '/slo') {
      const query = Object.fromEntries(url.searchParams);
      const parsed = await idp.parseLogoutRequest(sp, 'redirect', { query, octetString: octetString(url.search.slice(1)) });
      logouts.push({ name_id: parsed.extract.nameID, issuer: parsed.extract.issuer, signed: Boolean(query.Signature) });
      res.writeHead(200, { 'content-type': 'text/html' }).end(page('<p>Signed out.</p>'));
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    }
  } catch (error) {
    res.writeHead(400, { 'content-type': 'text/plain' }).end(`error: ${error && error.message ? error.message : error}`);
  }
});

server.listen(port, '127.0.0.1', () => {
  process.stdout.write(`ready ${base}\n`);
});
