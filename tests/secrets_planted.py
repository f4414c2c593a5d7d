"""Planted secrets for the redaction tests: one per rule, made up here (random from a fixed seed), never real.

`PLANTED[rule]` is (text, secret): `text` holds `secret` where that rule, and no earlier one, must find it.
`ORDINARY` is text and code that must come out untouched (the precision corpus).
"""

from __future__ import annotations

import random
import string

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "_-"
UPPER32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
UPNUM = string.ascii_uppercase + string.digits


def _r(seed: str, n: int, alphabet: str = ALNUM) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


def _digits(seed: str, n: int) -> str:
    return str(random.Random(seed).randrange(10 ** (n - 1), 10**n))


def _pem(kind: str, seed: str, *, end: bool) -> tuple[str, str]:
    body = "\n".join(_r(f"{seed}{i}", 64, B64) for i in range(6))
    head = f"-----BEGIN {kind} PRIVATE KEY-----\n"
    block = head + body + (f"\n-----END {kind} PRIVATE KEY-----" if end else "")
    return block, block if end else body


_JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    "eyJzdWIiOiJ1c2VyLTQyIiwibmFtZSI6IkFkYSIsImlhdCI6MTcxNjIzOTAyMn0."
    "Zm9vYmFyYmF6cXV4X3NpZ25hdHVyZV92YWx1ZV8xMjM0NTY3ODkw"
)


def _planted() -> dict[str, tuple[str, str]]:
    p: dict[str, tuple[str, str]] = {}

    def put(rule: str, template: str, secret: str) -> None:
        p[rule] = (template.format(s=secret), secret)

    put("aws-access-token", "the key id is {s} for the bucket", "AKIA" + _r("aws", 16, UPPER32))
    put("aws-secret-access-key", "aws_secret_access_key = {s}\n", _r("aws-secret", 40))
    put("gcp-api-key", "curl 'https://generativelanguage.googleapis.com/v1?key={s}'", "AIza" + _r("gcp", 35, URLSAFE))
    put("gcp-oauth-client-secret", "client secret: {s}\n", "GOCSPX-" + _r("gocspx", 28, URLSAFE))
    put("azure-ad-client-secret", 'the app secret is "{s}"', _r("az", 3) + "8Q~" + _r("az2", 34, ALNUM + "_~.-"))
    put(
        "azure-storage-account-key",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={s};EndpointSuffix=core.windows.net",
        _r("azure-storage", 86, B64) + "==",
    )
    put("digitalocean-pat", "doctl auth init -t {s}", "dop_v1_" + _r("do", 64, HEX))
    put("digitalocean-access-token", "token {s} expires", "doo_v1_" + _r("doo", 64, HEX))
    put("github-pat", "git clone https://x:{s}@github.com/o/r", "ghp_" + _r("ghp", 36))
    put("github-fine-grained-pat", "GH={s}\n", "github_pat_" + _r("ghfg", 82, ALNUM + "_"))
    put("github-oauth", "oauth {s}", "gho_" + _r("gho", 36))
    put("github-app-token", "installation token {s}", "ghs_" + _r("ghs", 36))
    put("github-refresh-token", "refresh with {s}", "ghr_" + _r("ghr", 36))
    put(
        "gitlab-pat-routable",
        "use {s} here",
        "glpat-" + _r("glr", 30, ALNUM + "_-") + "." + _r("glr2", 2, HEX) + _r("glr3", 7, HEX),
    )
    put("gitlab-pat", "export GITLAB={s} ;", "glpat-" + _r("glpat", 20, ALNUM + "_-"))
    put("gitlab-ptt", "trigger {s}", "glptt-" + _r("glptt", 40, HEX))
    put("gitlab-rrt", "register {s}", "GR1348941" + _r("rrt", 20, ALNUM + "_-"))
    put("gitlab-runner-authentication-token", "runner {s}", "glrt-" + _r("glrt", 20, ALNUM + "_-"))
    put("gitlab-deploy-token", "deploy {s}", "gldt-" + _r("gldt", 20, ALNUM + "_-"))
    put("gitlab-cicd-job-token", "job {s}", "glcbt-64_" + _r("glcbt", 20, ALNUM + "_-"))
    put("bitbucket-client-secret", "bitbucket_secret = {s}\n", _r("bbs", 64, string.ascii_lowercase + string.digits))
    put("bitbucket-client-id", "bitbucket_client_id: {s}\n", _r("bbi", 32, string.ascii_lowercase + string.digits))
    put("anthropic-admin-api-key", "ANTHROPIC_ADMIN_KEY={s}\n", "sk-ant-admin01-" + _r("ant-admin", 93, URLSAFE) + "AA")
    put("anthropic-api-key", "ANTHROPIC_API_KEY={s}\n", "sk-ant-api03-" + _r("ant", 93, URLSAFE) + "AA")
    put(
        "openai-api-key",
        "OPENAI_API_KEY={s}\n",
        "sk-proj-" + _r("oa1", 74, URLSAFE) + "T3BlbkFJ" + _r("oa2", 73, URLSAFE) + "x",
    )
    put("openrouter-api-key", "key sk? {s} ok", "sk-or-v1-" + _r("or", 64, HEX))
    put("xai-api-key", "XAI_API_KEY={s}\n", "xai-" + _r("xai", 80))
    put("groq-api-key", "GROQ_API_KEY={s}\n", "gsk_" + _r("groq", 52))
    put("huggingface-access-token", "HF_TOKEN={s}\n", "hf_" + _r("hf", 34, string.ascii_letters))
    put("huggingface-organization-api-token", "org {s}\n", "api_org_" + _r("hforg", 34, string.ascii_letters))
    put("perplexity-api-key", "pplx {s}\n", "pplx-" + _r("pplx", 48))
    put("cohere-api-token", "COHERE_API_KEY={s}\n", _r("cohere", 40))
    put(
        "slack-bot-token",
        "SLACK_BOT_TOKEN={s}\n",
        f"xoxb-{_digits('sb1', 11)}-{_digits('sb2', 13)}-{_r('sb3', 24)}",
    )
    put(
        "slack-user-token",
        "user token {s}\n",
        f"xoxp-{_digits('su1', 11)}-{_digits('su2', 11)}-{_digits('su3', 12)}-{_r('su4', 32, HEX)}",
    )
    put("slack-app-token", "app {s}\n", f"xapp-1-A{_r('sa', 10, UPPER32)}-{_digits('sa2', 13)}-{_r('sa3', 64, HEX)}")
    put("slack-config-access-token", "cfg {s}\n", "xoxe.xoxp-1-" + _r("sca", 165, UPNUM))
    put("slack-config-refresh-token", "cfg {s}\n", "xoxe-1-" + _r("scr", 146, UPNUM))
    put("slack-legacy-bot-token", "bot {s}\n", f"xoxb-{_digits('slb', 10)}-Q{_r('slb2', 23)}")
    put(
        "slack-legacy-token",
        "legacy {s}\n",
        f"xoxs-{_digits('sl1', 10)}-{_digits('sl2', 10)}-{_digits('sl3', 10)}-{_r('sl4', 64, HEX)}",
    )
    put("slack-legacy-workspace-token", "workspace {s}\n", "xoxa-2-" + _r("slw", 40))
    put(
        "slack-webhook-url",
        "post to {s}\n",
        f"https://hooks.slack.com/services/T{_r('sw1', 8, UPPER32)}/B{_r('sw2', 10, UPPER32)}/{_r('sw3', 24)}",
    )
    put("discord-bot-token", 'client.run("{s}")', f"MT{_r('db1', 22, URLSAFE)}.{_r('db2', 6, URLSAFE)}.{_r('db3', 27)}")
    put("discord-api-token", "discord_api = {s}\n", _r("dapi", 64, HEX))
    put("discord-client-secret", "DISCORD_CLIENT_SECRET={s}\n", _r("dcs", 32, string.ascii_lowercase + "0123456789"))
    put(
        "telegram-bot-api-token",
        "TELEGRAM_BOT_TOKEN={s}\n",
        f"{_digits('tg', 10)}:A{_r('tg2', 34, URLSAFE)}",
    )
    put("telegram-bot-token", "bot = Bot('{s}')", f"{_digits('tb', 9)}:AA{_r('tb2', 33, URLSAFE)}")
    put("stripe-access-token", "stripe.api_key = '{s}'", "sk_live_" + _r("stripe", 24))
    put("square-access-token", "square {s}\n", "sq0atp-" + _r("square", 22, URLSAFE))
    put("shopify-access-token", "X-Shopify-Access-Token: {s}\n", "shpat_" + _r("shpat", 32, HEX))
    put("shopify-custom-access-token", "custom {s}\n", "shpca_" + _r("shpca", 32, HEX))
    put("shopify-private-app-access-token", "private {s}\n", "shppa_" + _r("shppa", 32, HEX))
    put("shopify-shared-secret", "shared {s}\n", "shpss_" + _r("shpss", 32, HEX))
    block, secret = _pem("RSA", "pem", end=True)
    p["private-key"] = (f"cat id_rsa\n{block}\n", secret)
    block, secret = _pem("OPENSSH", "pem-cut", end=False)
    p["private-key-unterminated"] = (f"head -c 400 id_ed25519\n{block}", secret)
    put("jwt", "the cookie was session={s}; Path=/", _JWT)
    put("url-password", "DATABASE_URL=postgres://app:{s}@db.internal:5432/app", "Zq8v3Lm2Xp9wT4")
    put("authorization-header", 'curl -H "Authorization: Bearer {s}" https://api.internal/v1', _r("bearer", 40))
    put("generic-api-key", 'api_key = "{s}"', "a8f3K2m9Q7x1Z5c4V6b8N0")
    return p


PLANTED = _planted()

# Ordinary text and code that must not be touched: what transcripts are made of.
ORDINARY: tuple[str, ...] = (
    "commit 3f2a9c1b7e6d5a4f3e2d1c0b9a8f7e6d5c4b3a29\nAuthor: Ada <ada@example.com>",
    "git log --oneline: 9fceb02 Fix the login form; e83c516 Add tests; a1b2c3d Merge branch 'main'",
    "session 123e4567-e89b-12d3-a456-426614174000 resumed from 019e1695-0522-7c83-8b39-0dd379793f80",
    "image/png sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 48213 bytes",
    "attachments: ['image/jpeg sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae 1024 bytes']",
    "def resolve_duplicate_session_identifiers_across_archived_and_live_roots(sessions, manifest): ...",
    "/home/dev/src/billing-api/src/auth/token_refresh_handler.py:142: in refresh_access_token_if_expired",
    "Read /Users/sam/projects/web-dashboard/node_modules/.pnpm/react-dom@18.2.0/node_modules/react-dom/index.js",
    '{"input_tokens": 1234567890123, "cache_read_input_tokens": 98765432101, "output_tokens": 4321}',
    "max_tokens: 4096\ntemperature: 0.2\nmodel: claude-opus-4-6",
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-dashboard-7d9f8b6c5d",
    "const primaryKey = 'user_id'; const keyboardShortcut = 'ctrl+k'; const monkey = 'banana42'",
    "key_id = 8d3f2a1b-9c4e-4f7a-b2d1-0e6c5a4b3f21",
    "password = os.environ['DB_PASSWORD']  # never hard-code it",
    "DATABASE_URL=postgres://app:${DB_PASSWORD}@db.internal:5432/app",
    "docs: postgres://user:password@localhost:5432/mydb is the example URL",
    "git@github.com:acme/billing-api.git and https://github.com/acme/billing-api/pull/1234",
    "ssh deploy@10.0.0.12 'systemctl restart web'; scp build.tar.gz ci-user@builder:/tmp/",
    "https://example.com:8080/path/to/thing?query=1&x=y#anchor and http://localhost:3000/api/v1/users",
    "The token counter moved from 1200 to 1450; the secret to fast code is to measure first.",
    "export PATH=$HOME/.local/bin:$PATH; source .venv/bin/activate",
    "Bearer tokens expire after an hour: set `Authorization: Bearer $TOKEN` from the environment.",
    "sha256sum dist/app.tar.gz\n5994471abb01112afcc18159f6cc74b4f511b99806da59b3caf5a9c173cacfc5  dist/app.tar.gz",
    "npm ERR! code ERESOLVE while resolving: @typescript-eslint/eslint-plugin@6.21.0",
    "    at Object.<anonymous> (/home/ana/src/ledger/test/unit/invoice.spec.ts:88:23)",
    "SELECT session_id, count(*) FROM turns WHERE role = 'user' GROUP BY ALL ORDER BY 2 DESC LIMIT 10",
    "base64 of the icon: iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAYAAAAf8/9hAAAA",
    "toolu_01XyZ2AbCdEfGhIjKlMnOpQr and msg_01HJK9Lm3NoPqRsTuVwXyZ12 and req_011CXtq9Ab",
    "The function `accessibility_check_for_every_button` runs in CI; `secret_name_length = 32`.",
    "kubectl get secret web-tls -o yaml | grep tls.crt | head -c 40",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
    "version 2.1.38, gitBranch main, cwd /home/u/proj, model gpt-5.4, cli 0.125.0",
    "A.very.long.dotted.identifier.name.for.a.java.package.com.example.billing.internal.Service",
    "MAX_RETRIES=5\nTIMEOUT_SECONDS=30\nLOG_LEVEL=debug\nFEATURE_FLAG_NEW_CHECKOUT=true",
    "asia-southeast1 and Asia/Tokyo and the AWS region us-east-1 (aws s3 ls s3://bucket/prefix/)",
)
