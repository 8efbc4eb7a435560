"""A replay's kernel times rescaled to one SM clock: a time measured at clock c becomes
time x c / REF, what the launch would take at REF if its cycles stayed the same (a kernel bound by
its tensor cores; one bound by memory does not speed up with the clock, so this bounds what the
clock explains). Shared by the scripts that rescale a validation matrix
(measure/validation/normalize_matrix_clock.py) and a calibration's replays
(measure/calibration/normalize_calibration_clock.py)."""


class Refused(Exception):
    """An input the rescaling cannot take; the message names the file (and line or pass)."""


def number(value, where):
    """A float from a CSV cell or JSON value; an empty cell is 0 (a clock that was not probed)."""
    if value is None or value == "":
        return 0.0
    try:
        return float(value)
    except (TypeError, ValueError):
        raise Refused(f"{where}: not a number: {value!r}") from None


def rescaled(time_us, clock_mhz, ref_mhz, where):
    """`time_us` at `ref_mhz`; a time <= 0 (nothing launched, or not measured) stays as it is."""
    if time_us <= 0.0:
        return time_us
    if not clock_mhz > 0.0:
        raise Refused(f"{where}: a time of {time_us} us without a clock (measured before the clock was probed)")
    return time_us * clock_mhz / ref_mhz


def rescale_passes(doc, ref_mhz, where):
    """Rescales, in place, the forward and backward measured_compute_us of a validation.json
    (`doc`) by their measured_sm_clock_mhz, and sets every clock that launched to `ref_mhz`."""
    for direction in ("forward", "backward"):
        if not isinstance(doc, dict) or not isinstance(doc.get(direction), dict):
            raise Refused(f"{where}: no {direction} pass (not a replay's validation.json)")
    for direction in ("forward", "backward"):
        p = doc[direction]
        times = p.get("measured_compute_us")
        clocks = p.get("measured_sm_clock_mhz")
        if clocks is None:
            raise Refused(f"{where}: no measured_sm_clock_mhz in {direction} (measured before the clock was probed)")
        if not isinstance(times, list) or not isinstance(clocks, list) or len(times) != len(clocks):
            raise Refused(f"{where} {direction}: measured_compute_us and measured_sm_clock_mhz are not lists of one length")
        clocks = [number(c, f"{where} {direction}") for c in clocks]
        p["measured_compute_us"] = [rescaled(number(t, f"{where} {direction}"), c, ref_mhz, f"{where} {direction}")
                                    for t, c in zip(times, clocks)]
        p["measured_sm_clock_mhz"] = [ref_mhz if c > 0.0 else 0.0 for c in clocks]
