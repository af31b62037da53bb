"""Choosing properties by name (:func:`fsm.properties.property_names`): the kits and the
worlds read a choice through it, so a typo or a bare string is an error, not a choice
that checks nothing."""

from __future__ import annotations

from typing import Any

import pytest

from fsm.properties import PROPERTIES, property_names


def test_property_names_default_to_all_and_keep_the_order_given() -> None:
    assert property_names(None) == tuple(PROPERTIES)
    assert property_names(["L1", "P2"]) == ("L1", "P2")
    assert property_names(()) == ()


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ("P1", "^property names are a collection of names, not the string 'P1'$"),
        (
            ["P1", "P9", "p2"],
            "^not a property: 'P9', 'p2'; the properties are P1, P2, P3, P4, P5, P6, P7, L1$",
        ),
    ],
)
def test_property_names_refuse_what_names_no_property(names: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        property_names(names)
