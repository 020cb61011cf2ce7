// An OpenID Connect provider for the test suite: oidc-provider (OpenID
// Certified) on 127.0.0.1, with a sign-in form of its own and a few ways
// to misbehave, chosen with POST /__mode, so that the service's checks can
// be seen to refuse what a compromised or misconfigured provider sends.
//
//   node oidc.mjs <port> '<clients JSON>'
//
// Accounts: the login is the account's email; any password but "wrong" is
// accepted. Prints "ready <issuer>" once listening.

import http from 'node:http';
import { readForm } from './forms.mjs';
import Provider from 'oidc-provider';
import { SignJWT, exportJWK, generateKeyPair, importJWK } from 'jose';

const port = Number(process.argv[2]);
const clients = JSON.parse(process.argv[3]);
const issuer = `http://127.0.0.1:${port}`;

const accounts = {
  'alice@acme.test': { name: 'Alice Admin', email_verified: true, groups: ['agon-admins', 'staff'] },
  'bob@acme.test': { name: 'Bob Builder', email_verified: true, groups: ['staff'] },
  'carol@acme.test': { name: 'Carol Contractor', email_verified: true, groups: [] },
  'dave@acme.test': { name: 'Dave Unverified', email_verified: false, groups: ['staff'] },
  'mallory@evil.test': { name: 'Mallory', email_verified: true, groups: ['staff'] },
};

async function signingKey(kid) {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = await exportJWK(privateKey);
  return { ...jwk, kid, alg: 'RS256', use: 'sig' };
}

function publicPart(jwk) {
  const { d, p, q, dp, dq, qi, ...pub } = jwk;
  return pub;
}

const primary = await signingKey('k1');
// Published once the provider "rotates"; signs nothing before.
const rotated = await signingKey('k2');
// Never published: a token signed with it must be refused.
const stranger = await signingKey('k3');

let mode = 'normal';

const provider = new Provider(issuer, {
  clients,
  jwks: { keys: [primary] },
  async findAccount(ctx, id) {
    const account = accounts[id];
    if (!account) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: `sub-${id}`, email: id, ...account };
      },
    };
  },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'groups'],
  },
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: { enabled: true },
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  cookies: { keys: ['agon-test-idp-cookie-key'] },
  renderError(ctx, out) {
    ctx.type = 'text/plain';
    ctx.body = `error: ${out.error}: ${out.error_description || ''}`;
  },
});

async function resign(token, change, key) {
  const [, payload] = token.split('.');
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
  change(claims);
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'JWT' })
    .sign(await importJWK(key, 'RS256'));
}

// The misbehaviours, applied to the token endpoint's answer and the keys.
provider.use(async (ctx, next) => {
  await next();
  if (ctx.path === '/jwks' && mode === 'rotated' && ctx.body?.keys) {
    ctx.body = { keys: [...ctx.body.keys, publicPart(rotated)] };
  }
  if (ctx.path !== '/token' || !ctx.body?.id_token) return;
  const token = ctx.body.id_token;
  if (mode === 'tampered') {
    const [header, payload, signature] = token.split('.');
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    claims.email = 'mallory@acme.test';
    const forged = Buffer.from(JSON.stringify(claims)).toString('base64url');
    ctx.body = { ...ctx.body, id_token: `${header}.${forged}.${signature}` };
  } else if (mode === 'wrong_audience') {
    ctx.body = { ...ctx.body, id_token: await resign(token, (c) => { c.aud = 'someone-else'; }, primary) };
  } else if (mode === 'expired') {
    const past = Math.floor(Date.now() / 1000) - 7200;
    ctx.body = { ...ctx.body, id_token: await resign(token, (c) => { c.iat = past; c.exp = past + 60; }, primary) };
  } else if (mode === 'rotated') {
    ctx.body = { ...ctx.body, id_token: await resign(token, () => {}, rotated) };
  } else if (mode === 'unknown_key') {
    ctx.body = { ...ctx.body, id_token: await resign(token, () => {}, stranger) };
  }
});

function page(body) {
  return `<!doctype html><html><head><title>Test IdP</title></head><body>${body}</body></html>`;
}

const callback = provider.callback();

const server = http.createServer(async (req, res) => {
  try {
    if (req.method === 'POST' && req.url === '/__mode') {
      mode = (await readForm(req)).get('mode') || 'normal';
      res.writeHead(200, { 'content-type': 'text/plain' }).end(mode);
      return;
    }
    const interaction = req.url.match(/^\/interaction\/([^/?]+)/);
    if (!interaction) {
      callback(req, res);
      return;
    }
    const details = await provider.interactionDetails(req, res);
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/html' }).end(page(
        `<form method="post" action="/interaction/${details.uid}">` +
        '<input name="login" autocomplete="username">' +
        '<input name="password" type="password">' +
        '<button type="submit">Sign in</button></form>'));
      return;
    }
    const form = await readForm(req);
    const login = form.get('login');
    if (!accounts[login] || form.get('password') === 'wrong') {
      await provider.interactionFinished(req, res, {
        error: 'access_denied',
        error_description: 'Unknown user or wrong password',
      }, { mergeWithLastSubmission: false });
      return;
    }
    const grant = new provider.Grant({ accountId: login, clientId: details.params.client_id });
    grant.addOIDCScope(details.params.scope);
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, {
      login: { accountId: login },
      consent: { grantId },
    }, { mergeWithLastSubmission: false });
  } catch (error) {
    res.writeHead(500, { 'content-type': 'text/plain' }).end(String(error));
  }
});

server.listen(port, '127.0.0.1', () => {
  process.stdout.write(`ready ${issuer}\n`);
});
