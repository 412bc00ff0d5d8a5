"""A large request the gateway will refuse anyway, refused on its head.

The front reads a request's whole body before anything looks at it. A caller that is
past its request rate, or a key that spent its pace of bytes refused for their size
(``admission/refusals.py``), would still make the gateway read, relay and parse
megabytes for each 429. So when a head announces a body of at least
``SCREEN_BYTES``, the front asks the app's screen (``FRONT_SCREEN``) first: its
refusal is answered at once and the body is dropped unread (the connection then
closes, as after any refusal on the head). Small requests are not screened: their
bodies cost less than the look-up.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from multidict import CIMultiDict

from tokenplane.errors import GatewayError

SCREEN_BYTES = 32 * 1024

Screen = Callable[[str, "CIMultiDict[str]"], GatewayError | None]  # (path, headers)
FRONT_SCREEN: web.AppKey[Screen] = web.AppKey("front_screen")
