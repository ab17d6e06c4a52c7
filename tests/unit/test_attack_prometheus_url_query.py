"""A --prometheus URL with a query or fragment is refused (gputop sends its own query) and
the refusal does not print them back: a token put there (``?token=...``, as some proxies
take one) is a secret as a password in the URL is, which is never printed back either."""

from __future__ import annotations

import pytest

from gputop.core.errors import UsageError
from gputop.core.prometheus.auth import check_url


@pytest.mark.parametrize(
    "url",
    [
        "http://prom:9090/?token=s3cret",
        "http://prom:9090/api?access_token=s3cret#frag",
        "http://prom:9090/#s3cret",
        "http://user:s3cret@prom:9090/?token=s3cret",
    ],
)
def test_a_query_or_fragment_is_refused_and_not_shown_back(url: str) -> None:
    with pytest.raises(UsageError) as refused:
        check_url(url)
    said = str(refused.value)
    assert "without ? or #" in said
    assert "s3cret" not in said and "frag" not in said
    assert "http://" in said and "prom:9090" in said


def test_a_plain_url_is_still_taken() -> None:
    assert check_url("http://prom:9090/") == "http://prom:9090"
