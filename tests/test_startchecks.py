"""The start checks' parts on their own (``crawler/operations/startchecks.py``,
``netpolicy.allow_hint``): which NETWORK_ALLOWLIST entry allows a refused
address, which seeds are refused and why, which directories cannot be
used. The checks as a user meets them: tests/test_startup.py."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from crawler.config import ConfigError
from crawler.network.policy import NetworkPolicy, allow_hint, parse_networks, refusal
from crawler.operations.startchecks import check_directory, check_file, refused_line, refused_seeds


@pytest.mark.parametrize(("address", "hint"), [
    ("127.0.0.1", "127.0.0.0/8"),
    ("127.0.0.2", "127.0.0.0/8"),
    ("10.1.2.3", "10.0.0.0/8"),
    ("172.20.0.1", "172.16.0.0/12"),
    ("192.168.1.10", "192.168.0.0/16"),
    ("100.64.0.7", "100.64.0.0/10"),
    ("169.254.1.1", "169.254.0.0/16"),
    ("169.254.169.254", "169.254.169.254/32"),  # the metadata service: itself, not all link-local
    ("::1", "::1/128"),
    ("fd00::5", "fc00::/7"),
    ("fe80::1", "fe80::/10"),
    ("::ffff:10.0.0.1", "10.0.0.0/8"),  # the allow-list reads an IPv4-mapped address as its IPv4 address
    ("64:ff9b::a00:1", "64:ff9b::a00:1/128"),  # NAT64: the IPv4 network would not allow it
    ("4000::1", "4000::1/128"),  # outside 2000::/3: no block of its own
])
def test_the_hint_is_the_entry_that_allows_the_address(address, hint):
    found = refusal(ip_address(address))
    assert found is not None
    assert allow_hint(found) == hint
    assert NetworkPolicy(parse_networks(hint)).check(ip_address(address)) is None


def test_refused_seeds_are_literal_addresses_and_names_resolving_to_them():
    seeds = ["http://127.0.0.2:8000/", "https://10.0.0.5/a", "http://localhost/", "http://93.184.215.14/",
             "http://127.0.0.2:8000/b", "http://no-such-host.invalid/"]
    found = refused_seeds(seeds)
    assert [(url, str(why)) for url, why in found] == [
        ("http://127.0.0.2:8000/", "127.0.0.2 (loopback)"), ("http://127.0.0.2:8000/b", "127.0.0.2 (loopback)"),
        ("https://10.0.0.5/a", "10.0.0.5 (private network)"), ("http://localhost/", "127.0.0.1 (loopback)")]
    assert refused_line(*found[3]) == ("seed http://localhost/ is refused: localhost resolves to 127.0.0.1 "
                                       "(loopback); allow it with -s NETWORK_ALLOWLIST=127.0.0.0/8")
    assert refused_seeds(seeds, parse_networks("127.0.0.0/8,10.0.0.0/8")) == []
    assert refused_seeds([]) == []


def test_a_directory_that_cannot_be_used_is_named_with_why(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    check_directory("WARC_DIR", None)
    check_directory("WARC_DIR", tmp_path)
    check_directory("WARC_DIR", tmp_path / "new" / "deeper")  # made later, by the writer
    assert not (tmp_path / "new").exists()  # not made by the check
    with pytest.raises(ConfigError, match=rf"^WARC_DIR='{a_file}' is a file, not a directory$"):
        check_directory("WARC_DIR", a_file)
    with pytest.raises(ConfigError, match=rf"^CRAWL_DIR='{a_file}/c' cannot be made: {a_file} is a file, not a "
                                          "directory$"):
        check_directory("CRAWL_DIR", a_file / "c")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match=r"is a broken symbolic link$"):
        check_directory("WARC_DIR", tmp_path / "dangling" / "w")


def test_a_file_that_cannot_be_written_is_named_with_why(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    check_file("STORE_PATH", None)
    check_file("STORE_PATH", tmp_path / "new" / "site.sqlite3")  # the store makes its directory
    check_file("LOG_FILE", a_file, make_directory=False)  # appended to, or written over
    with pytest.raises(ConfigError, match=rf"^STORE_PATH='{tmp_path}' is a directory, not a file$"):
        check_file("STORE_PATH", tmp_path)
    with pytest.raises(ConfigError, match=rf"^STORE_SPILL_PATH='{a_file}/x' cannot be written: its directory "
                                          rf"{a_file} is a file, not a directory$"):
        check_file("STORE_SPILL_PATH", a_file / "x")
    with pytest.raises(ConfigError, match=rf"^LOG_FILE='{tmp_path}/new/log' cannot be written: its directory "
                                          rf"{tmp_path}/new does not exist$"):
        check_file("LOG_FILE", tmp_path / "new" / "log", make_directory=False)
