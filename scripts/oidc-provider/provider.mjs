// An OpenID provider written by someone else than this project — panva's oidc-provider, a
// certified implementation — for the browser sign-in tests (cmd/taskcenter/
// oidc_provider_e2e_test.go). It runs with its own development screens: its login form
// (any login and password are accepted; the login is the user) and its consent form. It
// requires PKCE, offers RP-initiated logout (end_session_endpoint, with its own "sign out?"
// confirmation), and puts the profile claims in the ID token, where taskcenter reads them.
//
// Settings come from the environment:
//   OIDC_MODULES                   the node_modules oidc-provider is installed in
//                                  (scripts/oidc-provider.sh install)
//   OIDC_ISSUER                    e.g. http://localhost:9400 (the port is listened on, on loopback)
//   OIDC_CLIENT_ID, OIDC_CLIENT_SECRET
//   OIDC_REDIRECT_URI              taskcenter's /auth/callback
//   OIDC_POST_LOGOUT_REDIRECT_URI  where the end of a session may send the browser
// It prints "ready" once it listens.
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const env = (name) => {
  const v = process.env[name];
  if (!v) {
    console.error(`oidc-provider: ${name} is not set`);
    process.exit(2);
  }
  return v;
};

const modules = env('OIDC_MODULES');
const { default: Provider } = await import(pathToFileURL(path.join(modules, 'oidc-provider', 'lib', 'index.js')).href);

const issuer = env('OIDC_ISSUER');
const provider = new Provider(issuer, {
  clients: [{
    client_id: env('OIDC_CLIENT_ID'),
    client_secret: env('OIDC_CLIENT_SECRET'),
    redirect_uris: [env('OIDC_REDIRECT_URI')],
    post_logout_redirect_uris: [env('OIDC_POST_LOGOUT_REDIRECT_URI')],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
  },
  conformIdTokenClaims: false,
  claims: {
    openid: ['sub'],
    profile: ['preferred_username', 'name'],
    email: ['email', 'email_verified'],
  },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        return { sub: id, preferred_username: id, name: id, email: `${id}@example.com`, email_verified: true };
      },
    };
  },
  cookies: { keys: ['taskcenter-test-provider-cookie-key'] },
  ttl: { AuthorizationCode: 60, IdToken: 3600, AccessToken: 3600, Grant: 3600, Interaction: 600, Session: 3600 },
});

// Loopback only, both families: a browser may resolve localhost to either.
const port = Number(new URL(issuer).port);
const handler = provider.callback();
const listen = (host) => new Promise((resolve, reject) => {
  const server = http.createServer(handler);
  server.once('error', reject);
  server.listen(port, host, () => resolve(server));
});
await listen('127.0.0.1');
await listen('::1').catch((err) => console.error(`oidc-provider: not on ::1 (${err.code})`));
console.log('ready');
