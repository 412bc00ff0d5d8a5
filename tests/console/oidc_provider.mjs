// A real OpenID Connect provider for the console's sign-in tests: the certified
// open-source `oidc-provider` (npm), authorization code flow with PKCE required,
// client_secret_basic, its development login and consent pages (any login name is
// an account; its claims come from ACCOUNTS). Run by tests/console/oidc.py:
//   node oidc_provider.mjs <path to oidc-provider/lib/index.js> <port> <redirect_uri>
// Prints "ready" once it listens.
import { pathToFileURL } from 'node:url';

const [libPath, port, redirectUri] = process.argv.slice(2);
const { default: Provider } = await import(pathToFileURL(libPath).href);
const accounts = JSON.parse(process.env.OIDC_ACCOUNTS || '{}');

const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: [{
    client_id: 'tokenplane-console',
    client_secret: process.env.OIDC_CLIENT_SECRET,
    redirect_uris: [redirectUri],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  pkce: { required: () => true },
  scopes: ['openid', 'tokenplane'],
  claims: { openid: ['sub'], tokenplane: ['tokenplane_tenant', 'tokenplane_role', 'tokenplane_department'] },
  conformIdTokenClaims: false, // the scope's claims in the ID token itself
  features: { devInteractions: { enabled: true } },
  cookies: { keys: ['tokenplane-test-cookie-key'] },
  async findAccount(ctx, id) {
    return { accountId: id, async claims() { return { sub: id, ...(accounts[id] || {}) }; } };
  },
});
provider.listen(Number(port), '127.0.0.1', () => { console.log('ready'); });
