r"""Passwords given to a command-line client on its command line.

Agents run these in the shell and the transcript keeps the command: `docker login -u ci -p …`,
`redis-cli -a …`, `mongosh -u admin -p …`, `sqlcmd -U sa -P …`, `ldapsearch -D … -w …`,
`smbclient -U user%…`, `openssl … -passout pass:…`, `keytool -storepass …`, `zip -P …`,
`rabbitmqctl add_user NAME …`, `echo … | docker login --password-stdin`, `psexec \\\\host -u
admin -p …`, PowerShell's `Connect-VIServer -Password …` and `ConvertTo-SecureString '…'
-AsPlainText`, Oracle's `sqlplus user/…@db`, `ssh-keygen -P … -N …`, `gpg --passphrase …`.
The flag that carries
the password is the client's own (docker's `-p` is a port elsewhere, mongo's `-p` a password),
so each client names its flags, and only its command line is read: from the client's name to
the end of the line or of the command (`;`, `&&`, `|`).

The value is what the shell passes: a word, or a quoted string. Left: a reference or
substitution (`$PW`, `${PW}`, `$(cat pw)`), a template (`<password>`, `{{ pw }}`), a mask
(`***`), the next flag (a client that will prompt: `mongosh -u admin -p --authenticationDatabase
admin`), and stock placeholder words (`password`, `changeme`).

Linear: one pass finds the clients' names; each reads its own line once, with bounded
expressions.
"""

from __future__ import annotations

import re
from typing import Final

from funes.ingest.markers import MARKER_PREFIX

__all__ = ["ANCHORS", "scan"]

Raw = list[tuple[int, int, int, str]]

#: Where these findings rank when they overlap another detector's (as funes.ingest.contexts).
PRIORITY: Final = 7

_VALUE: Final = r"(?P<q>\\?[\"']?)(?P<v>(?!-)[^\s\"'\\;&|]{1,128})(?P=q)(?=[\s;&|)]|$)"

#: (client, its password flags as an expression matched right after a space). `-pVALUE`
#: glued (mysql's, 7z's) is a flag too.
_CLIENTS: Final[tuple[tuple[str, str], ...]] = (
    (r"(?:docker|podman|buildah|skopeo|oras|nerdctl)[ \t]{1,4}login|helm[ \t]{1,4}registry"
     r"[ \t]{1,4}login", r"(?:-p|--password)(?:[ \t]{1,4}|=)"),
    (r"redis-cli|keydb-cli|valkey-cli", r"(?:-a|--pass)(?:[ \t]{1,4}|=)"),
    (r"az[ \t]{1,4}login", r"(?:-p|--password)(?:[ \t]{1,4}|=)"),
    (r"mongo|mongosh|mongodump|mongorestore|mongoexport|mongoimport|mongostat|mongotop",
     r"(?:-p|--password)(?:[ \t]{1,4}|=)"),
    (r"sqlcmd|bcp|osql|isql", r"-P[ \t]{0,4}"),
    (r"ldapsearch|ldapadd|ldapmodify|ldapdelete|ldapwhoami|ldappasswd|ldapcompare|ldapmodrdn",
     r"-w[ \t]{1,4}"),
    (r"smbclient|rpcclient|smbmap|crackmapexec|netexec", r"-U[ \t]{1,4}[^\s%]{1,64}%"),
    (r"openssl", r"(?:-pass(?:in|out)?[ \t]{1,4}pass:|-k[ \t]{1,4})"),
    (r"keytool", r"-(?:store|key|srcstore|deststore|srckey|destkey)pass[ \t]{1,4}"),
    (r"zip|unzip", r"-P[ \t]{1,4}"),
    (r"7z|7za|7zr", r"-p"),
    (r"rabbitmqctl", r"(?:add_user|change_password)[ \t]{1,4}[^\s]{1,64}[ \t]{1,4}"),
    (r"mysql|mysqldump|mysqladmin|mariadb|mariadb-dump", r"-p"),
    (r"sshpass", r"-p[ \t]{0,4}"),
    # a key's old and new passphrases (`-N ''`, no passphrase, is no value)
    (r"ssh-keygen", r"-[PN][ \t]{0,4}"),
    (r"gpg|gpg2", r"--passphrase(?:[ \t]{1,4}|=)"),
    (r"psexec(?:64)?(?:\.exe)?|paexec(?:\.exe)?", r"-p[ \t]{1,4}"),
    # PowerShell: parameters are case-insensitive, the client's name is matched lowercased.
    (r"connect-viserver|connect-ciserver|connect-hcxserver",
     r"(?i:-password)(?:[ \t]{1,4}|:)"),
    # The plain text comes first (or after `-String`): `ConvertTo-SecureString 'pw' -AsPlainText`.
    (r"convertto-securestring", r"(?i:(?<=securestring[ \t])|(?<=-string[ \t]))"),
)
#: Oracle's clients and thin JDBC URLs take `user/password@database` as one word
#: (`sqlplus -s scott/…@//db:1521/ORCL`, `jdbc:oracle:thin:scott/…@db:1521:ORCL`).
_ORACLE_CLIENTS: Final = ("sqlplus", "rman", "expdp", "impdp", "sqlldr", "dgmgrl")
_ORACLE_WORDS: Final = (*_ORACLE_CLIENTS, "jdbc:oracle")
_ORACLE: Final = re.compile(
    r"(?:(?<![\w./-])(?P<cmd>" + "|".join(_ORACLE_CLIENTS) + r")(?:[ \t]{1,4}-[A-Za-z]{1,2})"
    r"{0,3}[ \t]{1,4}(?:(?:target|catalog|auxiliary)[ \t]{1,4})?[\"']?"
    r"|(?i:jdbc:oracle:(?:thin|oci):))"
    r"[A-Za-z0-9_$#]{1,64}/(?P<v>[^\s/@\"']{1,128})(?=@|[\s\"']|$)"
)
#: A word each client's command line holds, lowercased: redaction's keyword pass looks for
#: them, and only a text holding one is read here.
ANCHORS: Final = frozenset({
    "login", "redis-cli", "keydb-cli", "valkey-cli", "mongo", "sqlcmd", "bcp", "osql", "isql",
    "ldap", "smbclient", "rpcclient", "smbmap", "crackmapexec", "netexec", "openssl", "keytool",
    "zip", "7z", "rabbitmqctl", "mysql", "mariadb", "sshpass", "ssh-keygen", "gpg",
    "password-stdin", "psexec", "paexec", "connect-viserver", "connect-ciserver",
    "connect-hcxserver",
    "convertto-securestring", *_ORACLE_WORDS,
})
_CLIENT: Final = re.compile(
    r"(?<![\w./-])(?:" + "|".join(f"(?P<c{i}>{c})" for i, (c, _f) in enumerate(_CLIENTS))
    + r")(?![\w-])"
)
_FLAGS: Final = tuple(
    re.compile(r"(?<![^ \t])" + flag + _VALUE) for _c, flag in _CLIENTS
)
#: `echo …` (or `printf '%s' …`) piped into a login that reads its password from stdin.
_STDIN: Final = re.compile(
    r"\b(?:echo(?:[ \t]{1,4}-n)?|printf(?:[ \t]{1,4}['\"]%s['\"])?)[ \t]{1,4}" + _VALUE
    + r"[ \t]{0,4}\|[^\n|]{0,200}--password-stdin"
)
_END: Final = re.compile(r"\n|;|&&|\|\||\|")
_PLACEHOLDER: Final = re.compile(
    r"(?i)(?:password|passwd|pass|secret|changeme|change_me|redacted|x{3,64}|\*{1,64}|none"
    r"|null)\d{0,3}"
)


def _value_ok(value: str) -> bool:
    """A literal password, not a reference, template, mask or stock word."""
    if len(value) < 4 or MARKER_PREFIX in value or value[0] in "$%{<[*`":
        return False
    return _PLACEHOLDER.fullmatch(value) is None


#: What comes before a client's name when it starts a command: nothing on the line, a shell
#: prompt or operator, a quote or parenthesis (`system("psexec …")`), a path's backslash, or a
#: launcher (`cmd.exe /C`, `sudo`, `start`, `bash -c`).
_COMMAND_HEAD: Final = re.compile(
    r"(?:^|[;&|(\"'`$#>\\]|/[cCkK]|(?<![\w-])(?:sudo|exec|start|call|run|time|nohup|-c))"
    r"[ \t]{0,8}$"
)


def _starts_command(text: str, start: int) -> bool:
    """Whether what starts at `start` starts a command (its line's head is a prompt or so)."""
    line_start = text.rfind("\n", max(0, start - 200), start) + 1
    return _COMMAND_HEAD.search(text, line_start or max(0, start - 200), start) is not None


def scan(text: str, lowered: str, out: Raw, commands: Raw | None = None) -> None:
    """Append each client password on `text`'s command lines to `out`.

    With `commands`, a password on a line where the client's name starts the command goes
    there instead: a shell word, whatever it looks like (`-p dev_admin`). One named in prose
    (`the mongo shell reads -p from its prompt`) stays in `out`, to be judged like any value.
    """
    done = 0  # a command line is read once, whatever clients it names
    for m in _CLIENT.finditer(lowered):
        if m.start() < done:
            continue
        end = _END.search(text, m.end())
        line_end = len(text) if end is None else end.start()
        i = int(next(k for k, v in m.groupdict().items() if v is not None)[1:])
        into = commands if commands is not None and _starts_command(text, m.start()) else out
        for f in _FLAGS[i].finditer(text, m.end(), line_end):
            if _value_ok(f.group("v")):
                into.append((f.start("v"), f.end("v"), PRIORITY, "password"))
        done = line_end
    if any(word in lowered for word in _ORACLE_WORDS):
        for o in _ORACLE.finditer(text):
            if not _value_ok(o.group("v")):
                continue
            on_command = o.group("cmd") is not None and _starts_command(text, o.start())
            into = commands if commands is not None and on_command else out
            into.append((o.start("v"), o.end("v"), PRIORITY, "password"))
    if "password-stdin" in lowered:
        for s in _STDIN.finditer(text):
            if _value_ok(s.group("v")):
                out.append((s.start("v"), s.end("v"), PRIORITY, "password"))
