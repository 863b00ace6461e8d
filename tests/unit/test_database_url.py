"""Database URLs are parsed with a real parser (urllib), percent-decoded, and never printed
with their password."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy.engine import make_url

from portalq.jobs.db.location import database_url, libpq_dsn, parse_url
from portalq.jobs.errors import InputError


@given(st.text(min_size=1, max_size=40).filter(lambda p: "\0" not in p))
def test_any_password_round_trips_percent_encoded(password):
    url = f"postgresql://ops:{quote(password, safe='')}@db.internal:6432/portalq?sslmode=require"
    parsed = parse_url(url)
    assert parsed.password == password and parsed.user == "ops"
    assert (parsed.host, parsed.port, parsed.database) == ("db.internal", 6432, "portalq")
    dsn = conninfo_to_dict(libpq_dsn(url))
    assert dsn["password"] == password and dsn["sslmode"] == "require"
    # SQLAlchemy (migrations) reads the same password from the URL portalq hands it
    assert make_url(parsed.sqlalchemy()).password == password
    assert parsed.redacted() == "postgresql+psycopg://ops:***@db.internal:6432/portalq?sslmode=require"


def test_special_characters_percent_decoded():
    parsed = parse_url("postgresql://ops:p%2Fa%23s%40s%3Aw%25d@db/portalq")
    assert parsed.password == "p/a#s@s:w%d"
    assert parse_url("postgresql://ops:p@ss:w@db/portalq").password == "p@ss:w"  # raw '@', ':'
    assert parsed.redacted() == "postgresql+psycopg://ops:***@db/portalq"


def test_connect_timeout_is_added_unless_the_url_sets_one(monkeypatch):
    monkeypatch.setenv("PORTALQ_CONNECT_TIMEOUT_SECONDS", "7")
    assert conninfo_to_dict(libpq_dsn(database_url("postgresql://h/db")))["connect_timeout"] == "7"
    assert "connect_timeout=3" in database_url("postgresql://h/db?connect_timeout=3")
    monkeypatch.setenv("PORTALQ_CONNECT_TIMEOUT_SECONDS", "0.5")  # libpq counts >= 2 s
    assert conninfo_to_dict(libpq_dsn(database_url("postgresql://h/db")))["connect_timeout"] == "2"
    assert database_url("postgresql://h/db", connect_timeout=30).endswith("connect_timeout=30")
    monkeypatch.setenv("PORTALQ_CONNECT_TIMEOUT_SECONDS", "soon")
    with pytest.raises(InputError, match="PORTALQ_CONNECT_TIMEOUT_SECONDS"):
        database_url("postgresql://h/db")


@pytest.mark.parametrize("url", [
    "postgresql://ops:s3cret@db:port/portalq", "postgresql://ops:s3#cret@db/portalq",
    "postgresql://ops:s3/cret@db/portalq", "mysql://ops:s3cret@db/portalq", "s3cret",
    "postgresql://ops:s3cret@db/portalq?nonsense=1", "postgresql://ops:s3cret@[db/portalq",
])
def test_malformed_urls_are_input_errors_without_the_password(url):
    with pytest.raises(InputError) as info:
        libpq_dsn(database_url(url))
    assert "s3" not in str(info.value) and "cret" not in str(info.value)
    assert info.value.__suppress_context__ or info.value.__cause__ is None


@pytest.mark.parametrize("url", [
    "postgresql://ops:s3cret@db1:5432,db2:5433/portalq?target_session_attrs=read-write",
    "postgresql://ops:s3cret@/portalq?host=db1,db2&port=5432,5433&target_session_attrs=read-write",
    "postgresql://ops:s3cret@/portalq?host=db1:5432&host=db2:5433&target_session_attrs=read-write",
])
def test_multi_host_urls_reach_libpq_and_sqlalchemy_as_one_host_list(url):
    out = database_url(url)
    dsn = conninfo_to_dict(libpq_dsn(out))
    assert (dsn["host"], dsn["port"], dsn["target_session_attrs"]) == (
        "db1,db2", "5432,5433", "read-write")
    assert dsn["password"] == "s3cret" and dsn["dbname"] == "portalq"
    # SQLAlchemy's psycopg dialect (migrations, the caller's engine) reads the same list
    from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg

    _, opts = PGDialect_psycopg().create_connect_args(make_url(out))
    assert (opts["host"], opts["port"]) == ("db1,db2", "5432,5433")
    assert "s3cret" not in parse_url(out).redacted()
    assert database_url(out) == out   # stable: parsing its own output changes nothing


def test_multi_host_ports_default_and_ipv6():
    dsn = conninfo_to_dict(libpq_dsn("postgresql://u@[::1]:5433,db2/portalq"))
    assert (dsn["host"], dsn["port"]) == ("::1,db2", "5433,")
    assert conninfo_to_dict(libpq_dsn("postgresql://u@a,b/db?port=6432"))["port"] == "6432"


@pytest.mark.parametrize("url, message", [
    ("postgresql://u:s3cret@db1:5432,db2:99999/portalq", "bad port"),
    ("postgresql://u:s3cret@db1,,db2/portalq", "empty host"),
    ("postgresql://u:s3cret@/portalq?host=a,b,c&port=1,2", "2 ports for 3 hosts"),
    ("postgresql://u:s3cret@/portalq?host=a:1&host=b:2&port=3", "both"),
])
def test_bad_host_lists_are_input_errors(url, message):
    with pytest.raises(InputError, match=message) as info:
        database_url(url)
    assert "s3cret" not in str(info.value)
