"""Credential formats by provider: a documented prefix (or shape) and the body after it.

The families are those trufflehog and gitleaks cover beyond funes's own shaped detectors
(funes.ingest.redact), written from the formats the providers document (a prefix such as
``shpat_``, ``dop_v1_``, ``hvs.`` and the length and alphabet of what follows), not from any
scanner's code. Cloud, CI and code hosting, payment, chat and mail, databases, observability,
AI providers, and webhooks whose URL is the credential.

A family's pattern only runs when one of its prefixes occurs: the prefixes join redaction's
single keyword pass over the lowercased text (:data:`ANCHORS`), so a text without any runs
none of these expressions. Every body is one character class with bounded or linear
repetition: no nested quantifier, linear in the text.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Final

__all__ = ["ANCHORS", "PRIORITY", "PROVIDERS", "scan"]

Raw = list[tuple[int, int, int, str]]
#: Below funes's own shaped detectors' numbers, above the generic ones: a provider token
#: keeps its kind where an assignment detector also finds it.
PRIORITY: Final = 3


_RUN_OF_FIVE: Final = re.compile(r"(.)\1{4}")


def filler(value: str) -> bool:
    """A test value in a credential's shape.

    Five identical characters in a row (`xxxxx`, `AAAAA`, `55555`), or a short unit repeated
    over the value's last three quarters (`ntn_1234567890…`, `abcd1234abcd1234…`).
    """
    return _RUN_OF_FIVE.search(value) is not None or periodic(value[len(value) // 4 :])


def random_enough(value: str) -> bool:
    """`value` could be a generated secret's body: not a filler, not a few characters repeated."""
    return _entropy(value) >= 2.5 and not filler(value)


def periodic(value: str) -> bool:
    """`value` is a unit of at most 16 characters repeated (`0123456789abcdef0123…`)."""
    n = len(value)
    return any(value[p:] == value[: n - p] for p in range(1, min(17, n // 2 + 1)))


def _entropy(value: str) -> float:
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0



#: A UUID's shape (lowercase, base36 in some providers' keys, hex in others).
_UUID_BODY: Final = r"[a-z0-9]{8}-[a-z0-9]{4}-[a-z0-9]{4}-[a-z0-9]{4}-[a-z0-9]{12}"

#: Azure's identifiable key signatures, 33 (32-byte keys) or 76 (64-byte keys) characters in.
_AZURE_32: Final = ("+ASb", "+AEh", "+ARm", "AIoT", "AzCa")
_AZURE_64: Final = ("+ASt", "ACDb", "APIM", "+ABa", "+AMC")
_B64_BEFORE: Final = r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/]"

#: (prefix literal, body expression) per provider family, as their documentation describes the
#: format. Matched anywhere (prefix, then a bounded body), with no word character before.
PROVIDERS: Final[dict[str, tuple[tuple[str, str], ...]]] = {
    # cloud
    "alibaba": (("LTAI", r"[A-Za-z0-9]{12,30}"),),
    "aws-appsync": (("da2-", r"[a-z0-9]{26}"),),
    "tencent": (("AKID", r"[A-Za-z0-9]{32}"),),
    "aws-bedrock": (("ABSK", r"[A-Za-z0-9+/]{100,200}={0,2}"),),
    "azure-ad-secret": (("Q~", r"[A-Za-z0-9_~.-]{31,34}"),),  # checked with 3 chars before it
    "yandex": (("AQVN", r"[A-Za-z0-9_-]{35,38}"), ("YCAJE", r"[A-Za-z0-9_-]{30,38}"),
               ("t1.", r"[A-Z0-9a-z_-]{10,4096}[=]{0,2}\.[A-Z0-9a-z_-]{86}[=]{0,2}")),
    "digitalocean": (("dop_v1_", r"[a-f0-9]{64}"), ("doo_v1_", r"[a-f0-9]{64}"),
                     ("dor_v1_", r"[a-f0-9]{64}")),
    "flyio": (("fo1_", r"[A-Za-z0-9_-]{40,4096}"), ("fm1r_", r"[A-Za-z0-9+/=_-]{40,4096}"),
              ("fm1a_", r"[A-Za-z0-9+/=_-]{40,4096}"), ("fm2_", r"[A-Za-z0-9+/=_-]{40,4096}")),
    "vault": (("hvs.", r"[A-Za-z0-9_-]{24,4096}"), ("hvb.", r"[A-Za-z0-9_-]{24,4096}"),
              ("hvr.", r"[A-Za-z0-9_-]{24,4096}")),
    "doppler": (("dp.pt.", r"[A-Za-z0-9]{40,4096}"), ("dp.st.", r"[A-Za-z0-9_.-]{40,4096}"),
                ("dp.sa.", r"[A-Za-z0-9]{40,4096}"), ("dp.ct.", r"[A-Za-z0-9]{40,4096}"),
                ("dp.scim.", r"[A-Za-z0-9]{40,4096}"), ("dp.audit.", r"[A-Za-z0-9]{40,4096}")),
    "amazon-mws": (("amzn.mws.", _UUID_BODY),),
    # Azure DevOps' current PATs: 84 characters, `JQQJ9` at 52, `AZDO` at 76 (checked with
    # the 76 before it).
    "azure-devops": (("AZDO", r"[A-Za-z0-9]{4}"),),
    # Azure's identifiable keys: a fixed signature at a fixed place in base64 (checked with
    # the characters before it): 32-byte keys (Service Bus, Event Hubs, Relay, IoT, Redis),
    # 64-byte keys (Storage, Cosmos DB, API Management, Batch, ML), Search and Container
    # Registry keys, Functions keys, and the common annotated keys' `JQQJ9` (Azure OpenAI, AI
    # services, Maps, Event Grid, …).
    "azure-identifiable": tuple(
        (sig, r"[A-P][A-Za-z0-9+/]{5}=") for sig in _AZURE_32
    ) + tuple((sig, r"[A-Za-z0-9+/]{5}[AQgw]==") for sig in _AZURE_64) + (
        ("AzSe", r"[A-D][A-Za-z0-9]{5}"), ("+ACR", r"[A-D][A-Za-z0-9+/]{5}"),
        ("AzFu", r"[A-Za-z0-9_-]{5}[AQgw]=="),
        ("JQQJ9", r"[9DH][A-Za-z0-9][A-L][A-Za-z0-9]{16}[A-Za-z][A-Za-z0-9]{7}"
                  r"(?:[A-Za-z0-9]{2}==)?"),
    ),
    "heroku": (("HRKU-", r"[A-Za-z0-9_-]{30,4096}"),),
    "netlify": (("nfp_", r"[A-Za-z0-9]{36,4096}"),),
    "supabase": (("sbp_", r"[a-f0-9]{40}"), ("sb_secret_", r"[A-Za-z0-9_-]{20,4096}")),
    "render": (("rnd_", r"[A-Za-z0-9]{28,4096}"),),
    "vercel": (("vcp_", r"[A-Za-z0-9]{24,4096}"), ("vck_", r"[A-Za-z0-9]{24,4096}")),
    "planetscale": (("pscale_tkn_", r"[A-Za-z0-9_.-]{32,4096}"),
                    ("pscale_pw_", r"[A-Za-z0-9_.-]{32,4096}"),
                    ("pscale_oauth_", r"[A-Za-z0-9_.-]{32,4096}")),
    "terraform": ((".atlasv1.", r"[A-Za-z0-9_=-]{60,4096}"),),
    "pulumi": (("pul-", r"[a-f0-9]{40}"),),
    "scalingo": (("tk-us-", r"[A-Za-z0-9_-]{48}"),),
    # CI and code hosting
    "buildkite": (("bkua_", r"[a-z0-9]{40}"),),
    "circleci": (("CCIPAT_", r"[A-Za-z0-9_]{30,4096}"),),
    "bitbucket": (("ATBB", r"[A-Za-z0-9_=.-]{24,4096}"),),
    "atlassian": (("ATATT3", r"[A-Za-z0-9_=+/.-]{100,4096}"),
                  ("ATCTT3", r"[A-Za-z0-9_=+/.-]{20,4096}"),
                  ("ATSTT3", r"[A-Za-z0-9_=+/.-]{100,4096}")),
    "sourcegraph": (("sgp_", r"(?:[a-f0-9]{16}_|local_)?[a-f0-9]{40}"), ("slk_", r"[a-f0-9]{64}")),
    "sonar": (("squ_", r"[a-f0-9]{40}"), ("sqp_", r"[a-f0-9]{40}"), ("sqa_", r"[a-f0-9]{40}")),
    "artifactory": (("AKCp", r"[A-Za-z0-9]{60,4096}"), ("cmVmdGtu", r"[A-Za-z0-9]{56,4096}")),
    "octopus": (("API-", r"[A-Z0-9]{25,27}"),),
    "bitbucket-dc": (("BBDC-", r"[A-Za-z0-9+/@_-]{40,44}"),),
    "gitea": (("gta_", r"[a-f0-9]{40}"),),
    "rubygems": (("rubygems_", r"[a-f0-9]{48}"),),
    # Private Packagist (Composer): organization read/update and user update tokens
    "private-packagist": (("packagist_ort_", r"[a-fA-F0-9]{68}"),
                          ("packagist_out_", r"[a-fA-F0-9]{68}"),
                          ("packagist_uut_", r"[a-fA-F0-9]{68}")),
    "clojars": (("CLOJARS_", r"[a-z0-9]{60}"),),
    "nuget": (("oy2", r"[a-z0-9]{43}"),),
    "harness": (("pat.", r"[A-Za-z0-9_-]{22}\.[a-f0-9]{24}\.[A-Za-z0-9]{20}"),),
    "snyk": (("snyk_", r"[A-Za-z0-9_-]{30,4096}"),),
    "prefect": (("pnu_", r"[A-Za-z0-9]{36}"),),
    "readme": (("rdme_", r"[a-z0-9]{70}"),),
    "postman": (("PMAK-", r"[a-f0-9]{24}-[a-f0-9]{34}"),),
    "linear": (("lin_api_", r"[A-Za-z0-9]{40}"), ("lin_oauth_", r"[A-Za-z0-9]{64}")),
    "figma": (("figd_", r"[A-Za-z0-9_-]{38,4096}"),),
    "typeform": (("tfp_", r"[A-Za-z0-9_-]{40,4096}"),),
    "contentful": (("CFPAT-", r"[A-Za-z0-9_-]{43}"),),
    "dependency-track": (("odt_", r"[A-Za-z0-9]{32,4096}"),),
    "stackhawk": (("hawk.", r"[A-Za-z0-9_-]{20}\.[A-Za-z0-9_-]{20}"),),
    "clickup": (("pk_", r"[0-9]{3,12}_[A-Z0-9]{32}"),),
    "django": (("django-insecure-", r"[A-Za-z0-9!@#$%^&*()_=+-]{40,64}"),),
    "pypi": (("pypi-AgE", r"[A-Za-z0-9_-]{60,4096}"),),  # PyPI and TestPyPI macaroons
    "ionic": (("ion_", r"[A-Za-z0-9]{42}"),),  # Ionic Appflow personal access tokens
    # GitHub App installation tokens in their JWT form (`ghs_<installation>_<JWT>`)
    "github-installation": (("ghs_", r"[0-9]{1,12}_eyJ[A-Za-z0-9_-]{10,4096}\.eyJ"
                                     r"[A-Za-z0-9_-]{10,4096}\.[A-Za-z0-9_-]{10,4096}"),),
    # payment
    "square": (("EAAA", r"[A-Za-z0-9_=+-]{60}"), ("sq0atp-", r"[A-Za-z0-9_-]{22}"),
               ("sq0csp-", r"[A-Za-z0-9_-]{43}")),
    "razorpay": (("rzp_live_", r"[A-Za-z0-9]{14,4096}"), ("rzp_test_", r"[A-Za-z0-9]{14,4096}")),
    "shippo": (("shippo_live_", r"[a-f0-9]{40}"), ("shippo_test_", r"[a-f0-9]{40}")),
    "braintree": (("access_token$production$", r"[a-z0-9]{16}\$[a-z0-9]{32}"),
                  ("access_token$sandbox$", r"[a-z0-9]{16}\$[a-z0-9]{32}")),
    # Onfido: `api_live.` or `api_sandbox.`, a region (`_us`, `_ca`) between them optional
    "onfido": tuple((f"api_{env}{region}.", r"[A-Za-z0-9_-]{11}\.[A-Za-z0-9_-]{32}")
                    for env in ("live", "sandbox") for region in ("", "_us", "_ca")),
    "paystack": (("sk_live_", r"[a-f0-9]{40}"),),
    "flutterwave": (("FLWSECK-", r"[a-f0-9]{32}-X"), ("FLWSECK_TEST-", r"[a-f0-9]{32}-X")),
    "ramp": (("ramp_sec_", r"[A-Za-z0-9]{40,4096}"), ("ramp_tok_", r"[A-Za-z0-9]{40,4096}")),
    "pagarme": (("ak_live_", r"[A-Za-z0-9]{30}"), ("ak_test_", r"[A-Za-z0-9]{30}")),
    # chat and mail
    "hubspot": (("pat-na1-", _UUID_BODY), ("pat-eu1-", _UUID_BODY)),
    "pubnub": (("pub-c-", _UUID_BODY), ("sub-c-", _UUID_BODY),
               ("sec-c-", r"[A-Za-z0-9]{48}")),
    "plaid": (("access-sandbox-", _UUID_BODY), ("access-development-", _UUID_BODY),
              ("access-production-", _UUID_BODY)),
    "zoho": (("1000.", r"[a-f0-9]{32}\.[a-f0-9]{32}"),),
    "duffel": (("duffel_test_", r"[A-Za-z0-9_-]{43}"), ("duffel_live_", r"[A-Za-z0-9_-]{43}")),
    "langfuse": (("sk-lf-", _UUID_BODY),),
    "tickettailor": (("sk_", r"[0-9]{1,10}_[0-9]{1,10}_[a-f0-9]{32}"),),
    "secret-key-hex": (("sk_", r"[a-f0-9]{32}"),),  # IEX Cloud and others: `sk_` + 32 hex
    "bannerbear": (("bb_pr_", r"[a-f0-9]{30}"), ("bb_ma_", r"[a-f0-9]{30}")),
    "saladcloud": (("salad_cloud_user_", r"[A-Za-z0-9]{40,4096}"),),
    "endorlabs": (("endr+", r"[A-Za-z0-9]{16,64}"),),
    "trufflehog": (("thog-key-", r"[a-f0-9]{16}"), ("thog-secret-", r"[a-f0-9]{32}")),
    "spectral": (("spu-", r"[a-f0-9]{32}"),),
    "besttime": (("pri_", r"[a-f0-9]{32}"),),
    # 32 hex digits, and since Shopify lengthened its keys 32 to 64 alphanumerics
    "shopify": (("shpat_", r"[A-Za-z0-9]{32,64}"), ("shpca_", r"[A-Za-z0-9]{32,64}"),
                ("shppa_", r"[A-Za-z0-9]{32,64}"), ("shpss_", r"[A-Za-z0-9]{32,64}")),
    "twilio": (("AC", r"[a-f0-9]{32}"), ("SK", r"[a-f0-9]{32}")),
    "mailgun": (("key-", r"[a-f0-9]{32}"),),
    "mailchimp": (("-us", r"[0-9]{1,2}"),),  # checked with its 32 hex digits before it
    "sendgrid": (("SG.", r"[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}"),),
    "sendinblue": (("xkeysib-", r"[a-f0-9]{64}-[A-Za-z0-9]{16}"),),
    "telegram": ((":AA", r"[A-Za-z0-9_-]{32,33}"),),  # checked with its bot id before it
    "twitch-stream": (("live_", r"[0-9]{6,12}_[A-Za-z0-9]{30}"),),
    "twitter": (("AAAAAAAAAAAAAAAAAAAAA", r"[A-Za-z0-9%]{30,4096}"),),
    "notion": (("ntn_", r"[A-Za-z0-9]{40,4096}"), ("secret_", r"[A-Za-z0-9]{43}")),
    "dropbox": (("sl.", r"[A-Za-z0-9_-]{130,4096}"),),
    # secret (`sk.`) and temporary (`tk.`) tokens; `pk.` ones are public
    "mapbox": (("sk.eyJ", r"[A-Za-z0-9_-]{30,4096}\.[A-Za-z0-9_-]{20,4096}"),
               ("tk.eyJ", r"[A-Za-z0-9_-]{30,4096}\.[A-Za-z0-9_-]{20,4096}")),
    # databases
    "mongodb-atlas": (("mdb_sa_sk_", r"[A-Za-z0-9_-]{30,4096}"),),
    "planetscale-db": (("pscale_", r"[a-z]{2,6}_[A-Za-z0-9_]{32,4096}"),),
    # observability
    "newrelic": (("NRAK-", r"[A-Z0-9]{27}"), ("NRII-", r"[A-Za-z0-9_-]{32}"),
                 ("NRJS-", r"[a-f0-9]{19}"), ("NRAA-", r"[a-f0-9]{27}"),
                 ("NRIQ-", r"[A-Za-z0-9_-]{32}"), ("NRBR-", r"[a-f0-9]{19}"),
                 ("-NRMA", r"")),  # a mobile app token: 42 characters before the suffix
    "grafana": (("glc_", r"[A-Za-z0-9+/]{32,4096}={0,2}"),
                ("glsa_", r"[A-Za-z0-9]{32}_[a-f0-9]{8}")),
    "sentry": (("sntrys_", r"[A-Za-z0-9+/=_]{40,4096}"), ("sntryu_", r"[a-f0-9]{64}")),
    "dynatrace": (("dt0c01.", r"[A-Z0-9]{24}\.[A-Z0-9]{64}"),
                  ("dt0s01.", r"[A-Z0-9]{24}\.[A-Z0-9]{64}")),
    "honeycomb": (("hcaik_", r"[a-z0-9]{58}"), ("hcxik_", r"[a-z0-9]{58}")),
    "launchdarkly": (("api-", _UUID_BODY), ("sdk-", _UUID_BODY)),
    "kolide": (("k2sk_v1_", r"[A-Za-z0-9]{24}"),),  # Kolide's device-trust API keys
    "ubidots": (("BBFF-", r"[A-Za-z0-9]{30}"),),  # an IoT platform's account token
    # ThingsBoard's device access token, in its device API's path
    "thingsboard": (("/api/v1/", r"[A-Za-z0-9]{20}(?=/(?:telemetry|attributes|rpc|claim))"),),
    # SoftLayer's (IBM Cloud classic) API key as the last segment of its SOAP endpoint
    "softlayer-soap": (("api.softlayer.com/soap/v3", r"(?:\.1)?/[A-Za-z0-9]{64}"),),
    "pixie": (("px-api-", _UUID_BODY), ("px-dep-", _UUID_BODY)),  # New Relic's Pixie
    # Tableau's personal access token secret: 16 bytes in base64, `:`, 32 characters (checked
    # with the 22 base64 characters before its `==:`)
    "tableau": (("==:", r"[A-Za-z0-9]{32}"),),
    # AI providers
    "groq": (("gsk_", r"[A-Za-z0-9]{48,4096}"),),
    "xai": (("xai-", r"[A-Za-z0-9]{70,4096}"),),
    "replicate": (("r8_", r"[A-Za-z0-9]{37}"),),
    "perplexity": (("pplx-", r"[A-Za-z0-9]{40,4096}"),),
    "openrouter": (("sk-or-v1-", r"[a-f0-9]{64}"),),
    "langsmith": (("lsv2_pt_", r"[a-f0-9]{32}_[a-f0-9]{10}"),
                  ("lsv2_sk_", r"[a-f0-9]{32}_[a-f0-9]{10}")),
    "pinecone": (("pcsk_", r"[A-Za-z0-9_]{50,4096}"),),
    "tavily": (("tvly-", r"[A-Za-z0-9-]{32,4096}"),),
    "firecrawl": (("fc-", r"[a-f0-9]{32}"),),
    "elevenlabs": (("sk_", r"[a-f0-9]{48}"),),
    "deepgram": (("dg_", r"[a-f0-9]{40}"),),
    "age": (("AGE-SECRET-KEY-1", r"[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),),
    "onepassword": (("ops_", r"eyJ[A-Za-z0-9_=-]{100,4096}"),),
    "okta": (("SSWS ", r"00[A-Za-z0-9_-]{40}"),),
    # Password hashes in the modular crypt format (shadow files, htpasswd, seeded users, a
    # cracking tool's input): not the password, but a short one falls to a dictionary.
    "password-hash": (
        ("$2a$", r"[0-9]{2}\$[./A-Za-z0-9]{53}"), ("$2b$", r"[0-9]{2}\$[./A-Za-z0-9]{53}"),
        ("$2y$", r"[0-9]{2}\$[./A-Za-z0-9]{53}"), ("$2x$", r"[0-9]{2}\$[./A-Za-z0-9]{53}"),
        ("$1$", r"[./A-Za-z0-9]{1,8}\$[./A-Za-z0-9]{22}"),
        ("$apr1$", r"[./A-Za-z0-9]{1,8}\$[./A-Za-z0-9]{22}"),
        ("$5$", r"(?:rounds=[0-9]{1,9}\$)?[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{43}"),
        ("$6$", r"(?:rounds=[0-9]{1,9}\$)?[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{86}"),
        ("$8$", r"[./A-Za-z0-9]{14}\$[./A-Za-z0-9]{43}"),
        ("$9$", r"[./A-Za-z0-9]{14}\$[./A-Za-z0-9]{43}"),
        ("$y$", r"[./A-Za-z0-9]{1,16}\$[./A-Za-z0-9]{1,64}\$[./A-Za-z0-9]{43}"),
        ("$argon2", r"(?:id|i|d)\$v=[0-9]{1,3}\$m=[0-9]{1,9},t=[0-9]{1,9},p=[0-9]{1,4}"
                    r"\$[A-Za-z0-9+/]{8,128}\$[A-Za-z0-9+/]{16,512}"),
        ("pbkdf2_sha256$", r"[0-9]{4,8}\$[A-Za-z0-9]{1,64}\$[A-Za-z0-9+/]{43}="),
        ("$krb5asrep$", r"[0-9]{1,2}\$(?:[^$\s:]{1,128}:)?[a-f0-9]{32}\$[a-f0-9]{64,16384}"),
        ("$krb5tgs$", r"[0-9]{1,2}\$(?:\*[^*\s]{1,256}\*\$)?[a-f0-9]{32}\$[a-f0-9]{64,16384}"),
    ),
    # tokens whose shape is the format
    "jwt-unsigned": (("eyJ", r"[A-Za-z0-9_-]{10,4096}\.eyJ[A-Za-z0-9_-]{10,16384}"),),
    # webhooks (the URL is the credential)
    "discord-webhook": (("discord.com/api/webhooks/", r"[0-9]{17,20}/[A-Za-z0-9_-]{60,70}"),
                        ("discordapp.com/api/webhooks/", r"[0-9]{17,20}/[A-Za-z0-9_-]{60,70}")),
    "teams-webhook": ((".webhook.office.com/webhookb2/", r"[A-Za-z0-9@/_-]{60,400}"),
                      ("outlook.office.com/webhook/", r"[A-Za-z0-9@/_-]{36,400}"),
                      (".logic.azure.com",
                       r":443/workflows/[a-f0-9]{32}/triggers/[A-Za-z0-9_/?=&%.-]{40,400}")),
    "zapier-webhook": (("hooks.zapier.com/hooks/catch/",
                        r"(?:[0-9]{3,12}/)?[A-Za-z0-9]{4,32}/?"),),
    "tines-webhook": ((".tines.com/webhook/", r"[a-z0-9]{20,40}/[a-z0-9]{20,40}"),),
    "salesforce": (("00D", r"[A-Za-z0-9]{12,15}![A-Za-z0-9._]{80,260}"),
                   ("5Aep", r"[A-Za-z0-9._]{80,90}")),
    # Firebase Cloud Messaging's legacy server key: `AAAA` + 7, `:APA91b`, ~134 (checked
    # with what comes before its colon).
    "firebase-fcm": ((":APA91b", r"[A-Za-z0-9_-]{120,160}"),),
    # A URL's signature or session token: what makes a SAS, Logic Apps or presigned S3/GCS URL
    # (or a session's temporary credentials in one) grant access; the rest of the URL stays.
    "url-signature": (("sig=", r"[A-Za-z0-9%_+/-]{30,200}={0,2}"),
                      ("X-Amz-Signature=", r"[a-f0-9]{64}"),
                      ("X-Goog-Signature=", r"[a-f0-9]{256,1024}"),
                      ("X-Amz-Security-Token=", r"[A-Za-z0-9%_.~+/-]{100,4096}={0,2}")),
    "tailscale": (("tskey-",
                   r"(?:auth|api|client|scim|webhook)-[A-Za-z0-9]{6,64}-[A-Za-z0-9]{16,64}"),),
    "dockerhub": (("dckr_pat_", r"[A-Za-z0-9_-]{27,64}"), ("dckr_oat_", r"[A-Za-z0-9_-]{27,64}")),
}

#: Families whose findings are not tokens.
KIND: Final = {"password-hash": "password-hash", "thingsboard": "url-path-token",
               "softlayer-soap": "url-path-token", "url-signature": "url-signature"}


#: The part of a match the placeholder test judges, where not all of it is random: an Azure
#: DevOps PAT's tail holds runs of `A` by design (its head is random); a hash's cost
#: (`600000`) is not filler (the digest after its last `$` is what is random).
_JUDGED_PART: Final[dict[str, Callable[[str], str]]] = {
    "azure-devops": lambda v: v[:52],
    "password-hash": lambda v: v.rsplit("$", 1)[-1],
}
#: Where the secret starts in a match that begins with what is not secret: after Okta's
#: header word `SSWS `, a device API's path, a URL parameter's `=`, an endpoint's last `/`.
_SECRET_START: Final[dict[str, Callable[[str], int]]] = {
    "okta": lambda v: len("SSWS "),
    "thingsboard": lambda v: len("/api/v1/"),
    "url-signature": lambda v: v.index("=") + 1,
    "softlayer-soap": lambda v: v.rindex("/") + 1,
}

_NOT_WORD_BEFORE = r"(?<![A-Za-z0-9_])"
_NOT_TOKEN_AFTER = r"(?![A-Za-z0-9_])"


def _provider_patterns() -> tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...]:
    """One compiled alternation per family, anchored on its literal prefixes."""
    out = []
    for family, formats in PROVIDERS.items():
        alts = []
        anchors = []
        for prefix, body in formats:
            before = {
                "Q~": r"(?<=[A-Za-z0-9_~.-]{3}\d)",
                "-us": r"(?<![A-Za-z0-9_])[a-f0-9]{32}",
                ":AA": r"(?<![A-Za-z0-9_])[0-9]{8,10}",
                ":APA91b": r"(?<![A-Za-z0-9_])AAAA[A-Za-z0-9_-]{7}",
                "-NRMA": r"(?<![A-Za-z0-9_])(?:AA|eu01xx)[a-f0-9]{40}",
                "AZDO": r"(?<![A-Za-z0-9_])[A-Za-z0-9]{52}JQQJ9[A-Za-z0-9]{19}",
                "SSWS ": r"(?<![A-Za-z0-9_])",
                "key-": r"(?<![A-Za-z0-9_-])",  # not `public-key-…`, `hellosign-key-…`
                "==:": r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{22}",
                "/api/v1/": r"(?<=[A-Za-z0-9.-])",  # after the host
                **{sig: _B64_BEFORE + "{33}" for sig in _AZURE_32},
                **{sig: _B64_BEFORE + "{76}" for sig in _AZURE_64},
                "AzSe": r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9]{42}",
                "+ACR": _B64_BEFORE + "{42}",
                "AzFu": r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9_-]{44}",
                "JQQJ9": r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9]{52}",
                "sig=": r"(?<=[?&])",  # a query parameter
                "X-Amz-Signature=": r"(?<=[?&])",
                "X-Goog-Signature=": r"(?<=[?&])",
                "X-Amz-Security-Token=": r"(?<=[?&])",
            }.get(prefix) or (
                "" if prefix.startswith((".", "discord", "outlook", "hooks."))
                else _NOT_WORD_BEFORE)
            if prefix.startswith(".webhook.") or prefix.startswith(".logic."):
                before = r"https://[A-Za-z0-9_-]{1,64}"  # the whole URL, tenant host included
            alts.append(before + re.escape(prefix) + body)
            anchors.append(prefix.lower())
        pattern = "(?:" + "|".join(alts) + ")" + (
            "" if family.endswith("webhook") or family == "salesforce" else _NOT_TOKEN_AFTER)
        out.append((family, tuple(anchors), re.compile(pattern)))
    return tuple(out)


_PROVIDERS: Final = _provider_patterns()
#: Every provider prefix, lowercased: redaction's single keyword pass over the lowercased text
#: looks for them with its own words (funes.ingest.redact), and only the families whose prefix
#: occurs run their pattern.
ANCHORS: Final = frozenset(a for _f, anchors, _p in _PROVIDERS for a in anchors)
_BY_ANCHOR: Final[dict[str, list[int]]] = {}
for _i, (_f, _anchors, _p) in enumerate(_PROVIDERS):
    for _a in _anchors:
        _BY_ANCHOR.setdefault(_a, []).append(_i)


def scan(text: str, present: set[str], out: Raw) -> None:
    """Append a finding for each provider token in `text` whose prefix is in `present`."""
    hits = ANCHORS.intersection(present)
    if not hits:
        return
    for i in sorted({i for a in hits for i in _BY_ANCHOR[a]}):
        for m in _PROVIDERS[i][2].finditer(text):
            value = m.group(0)
            family = _PROVIDERS[i][0]
            start_of = _SECRET_START.get(family)
            head = 0 if start_of is None else start_of(value)
            part = _JUDGED_PART.get(family)
            judged = value[head:] if part is None else part(value)
            if not random_enough(judged):
                continue  # "AC" + 32 zeros, "key-xxxx…": a placeholder in the format's shape
            start = m.start() + head
            out.append((start, m.end(), PRIORITY, KIND.get(family, "provider-token")))


