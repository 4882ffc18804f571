// A real OpenID provider for tests/tests/oidc_upstream.rs: npm oidc-provider on
// 127.0.0.1 (a free port), configured as the authorization server of an MCP server
// would be. Prints one JSON line `{"issuer": …, "exchange_client": {…}}` on stdout
// once it listens, then serves until killed.
//
// What it offers, all standard oidc-provider features:
// - dynamic client registration (RFC 7591), open: the gateway registers itself;
// - the authorization code grant with PKCE S256, and refresh tokens when
//   `offline_access` is granted (oidc-provider's default rule: the gateway asks for it
//   because the metadata lists it);
// - resource indicators (RFC 8707): an access token for an http://127.0.0.1 resource
//   is a JWT (RS256) whose `aud` is that resource, living ACCESS_TOKEN_TTL seconds;
// - revocation (RFC 7009), and the built-in login and consent pages (devInteractions),
//   where any login name signs in as that subject;
// - a custom RFC 8693 token-exchange grant (see `tokenExchange`).
//
// For the test's assertions it keeps a record of what happened (token requests,
// revocations, revoked grants) at GET /test/events, a user's own token for an
// audience at GET /test/mint?sub=S&aud=A&tenant=T, and at GET /test/refresh-check?sub=S
// it tries the last refresh token issued to S at its own token endpoint, as the client
// it was issued to, and answers what the token endpoint said.
//
// Environment: NODE_MODULES (where oidc-provider is installed; the workspace's
// otherwise), ACCESS_TOKEN_TTL (seconds, default 3600).
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const modules = process.env.NODE_MODULES || new URL("../../node_modules/", import.meta.url).pathname;
const load = async (name, from = join(modules, "resolve.js")) =>
  import(pathToFileURL(createRequire(from).resolve(name)).href);
const { default: Provider, errors } = await load("oidc-provider");
// jose is oidc-provider's own dependency: resolved from there.
const jose = await load("jose", createRequire(join(modules, "resolve.js")).resolve("oidc-provider"));

const TTL = Number(process.env.ACCESS_TOKEN_TTL || 3600);
const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";

// One signing key made for this run: the provider signs with it, the token-exchange
// grant verifies subject tokens with its public half.
const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const kid = randomBytes(8).toString("hex");
const signingJwk = { ...privateKey.export({ format: "jwk" }), kid, alg: "RS256", use: "sig" };

// Bind first: the issuer names the port.
const server = createServer();
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

// A client allowed only the token-exchange grant, for the test's direct request.
const exchangeClient = { client_id: "token-exchanger", client_secret: randomBytes(24).toString("hex") };

// Any resource on this machine is a resource server taking JWT access tokens with
// the scope `whoami`; anything else is refused (nothing leaves the machine).
function resourceServer(resource) {
  let url;
  try {
    url = new URL(resource);
  } catch {
    throw new errors.InvalidTarget("the resource is not a URL");
  }
  if (url.protocol !== "http:" || url.hostname !== "127.0.0.1") {
    throw new errors.InvalidTarget("only http://127.0.0.1 resources are served here");
  }
  return {
    scope: "whoami",
    audience: resource,
    accessTokenFormat: "jwt",
    accessTokenTTL: TTL,
    jwt: { sign: { alg: "RS256" } },
    // What oidc-provider's own ResourceServer offers, for tokens made by hand.
    identifier: () => resource,
  };
}

// The tenant claim of the tokens /test/mint makes (the provider writes a token's
// extra claims from `extraTokenClaims` when it saves it).
const mintedTenant = new WeakMap();

const provider = new Provider(issuer, {
  extraTokenClaims: (_ctx, token) =>
    mintedTenant.has(token) ? { tenant: mintedTenant.get(token) } : undefined,
  clients: [
    {
      ...exchangeClient,
      grant_types: [TOKEN_EXCHANGE],
      response_types: [],
      redirect_uris: [],
    },
  ],
  jwks: { keys: [signingJwk] },
  cookies: { keys: [randomBytes(32).toString("hex")] },
  // Any login name is an account whose subject is that name.
  findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  pkce: { required: () => true },
  ttl: {
    AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? TTL,
    // Longer than any test; said so that the provider does not warn about defaults.
    Grant: 3600,
    Interaction: 600,
    RefreshToken: 3600,
    Session: 3600,
  },
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // The one resource of the authorization request, for the code and refresh grants.
      defaultResource: (_ctx, _client, oneOf) => oneOf,
      getResourceServerInfo: (_ctx, resource) => resourceServer(resource),
      useGrantedResource: () => true,
    },
  },
});

// RFC 8693 token exchange: a JWT access token this provider issued (signature, issuer
// and expiry checked with its own key) is exchanged for a JWT access token of the same
// subject for the requested `resource` (or `audience`).
async function tokenExchange(ctx) {
  const { subject_token: subject, subject_token_type: type, resource, audience } = ctx.oidc.params;
  if (!subject || type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest(`subject_token of type ${ACCESS_TOKEN_TYPE} is required`);
  }
  const target = resource || audience;
  if (!target) throw new errors.InvalidTarget("resource or audience is required");
  let claims;
  try {
    ({ payload: claims } = await jose.jwtVerify(subject, publicKey, { issuer, typ: "at+jwt" }));
  } catch (e) {
    throw new errors.InvalidGrant(`subject_token refused: ${e.code || e.message}`);
  }
  const token = new provider.AccessToken({
    accountId: claims.sub,
    client: ctx.oidc.client,
    scope: "whoami",
    gty: "token_exchange",
  });
  token.resourceServer = resourceServer(target);
  ctx.oidc.entity("AccessToken", token);
  const value = await token.save();
  ctx.body = {
    access_token: value,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: "Bearer",
    expires_in: token.expiration,
    scope: token.scope,
  };
}
provider.registerGrantType(TOKEN_EXCHANGE, tokenExchange, [
  "subject_token",
  "subject_token_type",
  "resource",
  "audience",
  "scope",
  "requested_token_type",
]);

// The record the test reads.
const events = { registrations: 0, tokens: [], revocations: [], grantsRevoked: 0 };
const lastRefresh = new Map(); // sub -> { value, clientId }
provider.on("registration_create.success", () => {
  events.registrations += 1;
});
provider.on("grant.success", (ctx) => {
  const { AccessToken: at, RefreshToken: rt } = ctx.oidc.entities;
  events.tokens.push({
    grant_type: ctx.oidc.params.grant_type,
    sub: at?.accountId ?? rt?.accountId ?? null,
    ok: true,
  });
});
provider.on("grant.error", (ctx, error) => {
  events.tokens.push({ grant_type: ctx.oidc?.params?.grant_type, error: error.error, ok: false });
});
provider.on("grant.revoked", () => {
  events.grantsRevoked += 1;
});
provider.on("refresh_token.saved", (token) => {
  // Opaque refresh tokens: the value is the jti.
  lastRefresh.set(token.accountId, { value: token.jti, clientId: token.clientId });
});

// Revocation requests as they were answered (a JWT access token cannot be revoked:
// oidc-provider answers unsupported_token_type; a refresh token can, with its grant).
provider.use(async (ctx, next) => {
  await next();
  if (ctx.path === "/token/revocation") {
    events.revocations.push({ hint: ctx.oidc?.params?.token_type_hint ?? null, status: ctx.status });
  }
});

// What a user's sign-in at an application would give it: a JWT access token of
// `sub` for `aud` (here the gateway itself), carrying the claim `tenant`. Made the
// way the provider makes its own, with its own key.
async function mint(sub, aud, tenant) {
  const client = await provider.Client.find(exchangeClient.client_id);
  const token = new provider.AccessToken({ accountId: sub, client, scope: "whoami", gty: "authorization_code" });
  token.resourceServer = resourceServer(aud);
  mintedTenant.set(token, tenant);
  return { access_token: await token.save() };
}

async function refreshCheck(sub) {
  const last = lastRefresh.get(sub);
  if (!last) return { tried: false };
  const client = await provider.Client.find(last.clientId);
  const body = new URLSearchParams({ grant_type: "refresh_token", refresh_token: last.value });
  const basic = Buffer.from(
    `${encodeURIComponent(client.clientId)}:${encodeURIComponent(client.clientSecret)}`,
  ).toString("base64");
  const answer = await fetch(`${issuer}/token`, {
    method: "POST",
    headers: { authorization: `Basic ${basic}`, "content-type": "application/x-www-form-urlencoded" },
    body,
    signal: AbortSignal.timeout(10000),
  });
  const json = await answer.json().catch(() => ({}));
  return { tried: true, status: answer.status, error: json.error ?? null };
}

const callback = provider.callback();
server.on("request", async (req, res) => {
  const url = new URL(req.url, issuer);
  const reply = (body) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  if (req.method === "GET" && url.pathname === "/test/events") return reply(events);
  if (req.method === "GET" && url.pathname === "/test/mint") {
    const q = url.searchParams;
    return reply(await mint(q.get("sub"), q.get("aud"), q.get("tenant")));
  }
  if (req.method === "GET" && url.pathname === "/test/refresh-check") {
    return reply(await refreshCheck(url.searchParams.get("sub")));
  }
  return callback(req, res);
});

console.log(JSON.stringify({ issuer, exchange_client: exchangeClient }));
