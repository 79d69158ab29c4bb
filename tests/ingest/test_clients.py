"""Passwords on a command-line client's command line (funes.ingest.clients), and what stays."""

from __future__ import annotations

import time

import pytest

from funes.ingest.engines import redact_texts
from funes.ingest.redact import redact

PW = "Xq7vT2mPz9Lk"


@pytest.mark.parametrize("text", [
    f"docker login -u ci -p {PW} registry.example.com",
    f"podman login --password={PW} quay.io",
    f"helm registry login ghcr.io -u ada --password {PW}",
    f"redis-cli -h cache.internal -a {PW} ping",
    f"az login -u ada@example.com -p {PW}",
    f'mongosh "mongodb://db:27017" -u admin -p "{PW}"',
    f"mongodump --uri db -u backup --password {PW} --out /tmp/d",
    f"sqlcmd -S db -U sa -P {PW} -Q 'select 1'",
    f"ldapsearch -x -H ldap://dc -D cn=admin,dc=x -w {PW} -b dc=x",
    f"smbclient //srv/share -U ada%{PW} -c ls",
    f"openssl pkcs12 -export -in c.pem -inkey k.pem -passout pass:{PW} -out c.p12",
    f"keytool -importcert -keystore ks.jks -storepass {PW} -file ca.pem",
    f"zip -P {PW} -r out.zip dir",
    f"7z a -p{PW} out.7z dir",
    f"rabbitmqctl add_user ada {PW}",
    f"echo {PW} | docker login --username ada --password-stdin ghcr.io",
    f"mysqldump -uroot -p{PW} app > app.sql",
    f"sshpass -p '{PW}' ssh ops@10.0.3.17 uptime",
    f"cd /srv && docker login -u ci -p {PW} && docker push app",
    f"PsExec.exe \\\\\\\\10.0.4.7 -u CORP\\\\ops -p {PW} cmd /c hostname",
    f'Connect-VIServer -Server vc01 -User ops@vsphere.local -Password "{PW}"',
    f"$pw = ConvertTo-SecureString '{PW}' -AsPlainText -Force",
    f'$pw = ConvertTo-SecureString -String "{PW}" -AsPlainText -Force',
    f"sqlplus -s app_user/{PW}@//db.example.com:1521/ORCL @migrate.sql",
    f'sqlplus "sys/{PW} as sysdba"',
    f"rman target sys/{PW}@prod",
    f"expdp system/{PW} directory=dp schemas=hr",
    f"url: jdbc:oracle:thin:scott/{PW}@db.example.com:1521:ORCL",
    f"ssh-keygen -p -f ~/.ssh/id_ed25519 -P {PW} -N {PW}",
    f"gpg --batch --yes --passphrase '{PW}' -d secrets.tar.gpg",
    f"openssl enc -d -aes-256-cbc -k {PW} -in backup.enc -out backup.tar",
    # a word-only password is still a shell word, not an expression in code
    "cmd.exe /C PSEXEC \\\\10.0.94.120 -u Administrator -p dev_admin CMD /C ECHO",
    'system("psexec \\\\\\\\192.168.3.77 -u Administrator -p braksha shutdown -r");',
])
def test_a_clients_password_flag_is_redacted(text: str) -> None:
    out, found = redact_texts([text])[0]
    assert found and PW not in out and "dev_admin" not in out and "braksha" not in out, out


@pytest.mark.parametrize("text", [
    "docker run -p 8080:80 nginx",  # a port, not docker login's password
    "mongosh -u admin -p --authenticationDatabase admin",  # prompts
    "docker login -u ci -p $REGISTRY_PASSWORD registry.example.com",
    "redis-cli -a password ping",
    "mysql -u root -p app",
    "docker login -u ci --password-stdin < pw.txt",
    "zip -r out.zip dir && ls -p",
    "sqlcmd -S db -U sa -P <password>",
    "the mongo shell reads -p from its own prompt",
    "$s = ConvertTo-SecureString $plain -AsPlainText -Force",
    "ConvertTo-SecureString -AsPlainText -Force $plain",
    "psexec \\\\host -u ops -p $Password cmd",
    "PsExec.exe @hosts.txt -u CORP\\\\ADMIN -p PASSWORD cmd /c copy a b",
    "sqlplus /nolog @setup.sql",
    "sqlplus app/$DB_PASS@db",
    "jdbc:oracle:thin:@//db.example.com:1521/ORCL",
    "the sqlplus docs at docs/sqlplus/index.html",
    "ssh-keygen -t ed25519 -N '' -C ci@example.com -f deploy_key",
    "gpg --batch --passphrase-fd 0 -d secrets.tar.gpg",
])
def test_what_is_not_a_clients_password_is_left(text: str) -> None:
    assert redact(text) == (text, []), redact(text)[0]


def test_a_long_line_of_client_names_costs_its_length() -> None:
    """Each client reads its own command line once: many names on one line stay linear."""
    def cost(n: int) -> float:
        text = "docker login -u x redis-cli -a " * n
        t0 = time.thread_time()
        redact(text)
        return time.thread_time() - t0

    cost(100)
    assert cost(2000) / max(cost(250), 1e-6) < 24  # linear is about 8
