"""The templates: small realistic modules, each with bug sites of one or more kinds.

Placeholders in braces are names drawn per split (train and held-out pools are disjoint).
A bug's ``fixed`` text occurs exactly once in its module, and the buggy module fails at
least two of the function's cases (checked when a task is generated).
"""

from __future__ import annotations

from legorl_std.tasks.bugfix.model import Bug, Function, Template

T, H = "train", "heldout"

RECTANGLE = Template(
    doc="Rectangle helpers.",
    functions=(
        Function(
            "area",
            "def {area}({w}, {h}):\n    \"\"\"The area of a rectangle.\"\"\"\n    return {w} * {h}\n",
            "the area of the rectangle",
            ((3, 4), (5, 2), (10, 7), (1, 1)),
        ),
        Function(
            "perimeter",
            "def {perimeter}({w}, {h}):\n    \"\"\"The length of the rectangle's border.\"\"\"\n"
            "    return 2 * ({w} + {h})\n",
            "the perimeter of the rectangle",
            ((3, 4), (1, 1), (10, 5)),
        ),
    ),
    bugs=(
        Bug("wrong-operator", "area", "return {w} * {h}", "return {w} + {h}"),
        Bug("wrong-constant", "perimeter", "return 2 * (", "return 4 * ("),
    ),
    names={
        "mod": (("geometry", "shapes", "rectangles"), ("floorplan", "boxes", "panels")),
        "area": (("area", "rect_area", "surface"), ("panel_area", "floor_area", "covered")),
        "perimeter": (("perimeter", "border", "outline"), ("fence_length", "edge_total", "frame")),
        "w": (("width", "wide", "x_size"), ("length", "cols", "across")),
        "h": (("height", "h", "y_size"), ("breadth", "rows", "down")),
    },
)

TEMPERATURE = Template(
    doc="Temperature conversions.",
    functions=(
        Function(
            "to_f",
            "def {to_f}({deg}):\n    \"\"\"Degrees Celsius in Fahrenheit.\"\"\"\n    return {deg} * 9 / 5 + 32\n",
            "the temperature in degrees Fahrenheit",
            ((100,), (0,), (-40,), (20,)),
        ),
        Function(
            "to_c",
            "def {to_c}({deg}):\n    \"\"\"Degrees Fahrenheit in Celsius.\"\"\"\n    return ({deg} - 32) * 5 / 9\n",
            "the temperature in degrees Celsius",
            ((212,), (32,), (-40,), (50,)),
        ),
    ),
    bugs=(
        Bug("wrong-constant", "to_f", "* 9 / 5 + 32", "* 9 / 5 + 23"),
        Bug("wrong-operator", "to_c", "({deg} - 32)", "({deg} + 32)"),
    ),
    names={
        "mod": (("temperature", "weather", "thermo"), ("climate", "oven", "thermals")),
        "to_f": (("to_fahrenheit", "c_to_f", "fahrenheit"), ("celsius_in_f", "as_fahrenheit", "warm_f")),
        "to_c": (("to_celsius", "f_to_c", "celsius"), ("fahrenheit_in_c", "as_celsius", "cool_c")),
        "deg": (("degrees", "temp", "value"), ("reading", "t", "level")),
    },
)

GRADES = Template(
    doc="Exam results.",
    functions=(
        Function(
            "passed",
            "def {passed}({score}, {mark}):\n    \"\"\"True when the score reaches the pass mark.\"\"\"\n"
            "    return {score} >= {mark}\n",
            "True when the score reaches the pass mark (a score equal to the mark passes)",
            ((50, 50), (70, 70), (80, 50), (10, 50)),
        ),
        Function(
            "count",
            "def {count}({scores}, {mark}):\n    \"\"\"How many scores reach the pass mark.\"\"\"\n"
            "    return len([s for s in {scores} if s >= {mark}])\n",
            "how many scores reach the pass mark (a score equal to the mark counts)",
            (([50, 60, 40], 50), ([70, 70], 70), ([1, 2, 3], 5), ([90, 95, 90], 90)),
        ),
    ),
    bugs=(
        Bug("wrong-comparison", "passed", "return {score} >= {mark}", "return {score} > {mark}"),
        Bug("wrong-comparison", "count", "s >= {mark}]", "s > {mark}]"),
    ),
    names={
        "mod": (("grades", "exams", "results"), ("marking", "tests_board", "scorecard")),
        "passed": (("passed", "is_pass", "made_it"), ("qualifies", "meets_bar", "cleared")),
        "count": (("count_passes", "num_passed", "pass_total"), ("qualified_count", "how_many_clear", "bar_hits")),
        "score": (("score", "points", "result"), ("mark_got", "earned", "achieved")),
        "mark": (("mark", "threshold", "pass_mark"), ("bar", "floor_mark", "cutoff")),
        "scores": (("scores", "results_list", "all_points"), ("marks", "tallies", "entries")),
    },
)

SEQUENCES = Template(
    doc="Number sequences.",
    functions=(
        Function(
            "countdown",
            "def {countdown}({n}):\n    \"\"\"The whole numbers from {n} down to 1.\"\"\"\n"
            "    return list(range({n}, 0, -1))\n",
            "the numbers from `{n}` down to 1, both included",
            ((3,), (5,), (1,)),
        ),
        Function(
            "evens",
            "def {evens}({n}):\n    \"\"\"The even numbers from 0 up to {n}, {n} included.\"\"\"\n"
            "    return list(range(0, {n} + 1, 2))\n",
            "the even numbers from 0 up to and including `{n}`",
            ((4,), (6,), (5,), (0,)),
        ),
    ),
    bugs=(
        Bug("off-by-one", "countdown", "range({n}, 0, -1)", "range({n}, 1, -1)"),
        Bug("off-by-one", "evens", "range(0, {n} + 1, 2)", "range(0, {n}, 2)"),
    ),
    names={
        "mod": (("sequences", "counting", "numbering"), ("launch", "ladder", "series")),
        "countdown": (("countdown", "down_from", "descending"), ("launch_seq", "backwards", "count_back")),
        "evens": (("evens", "even_numbers", "even_upto"), ("pairs_upto", "even_steps", "doubles")),
        "n": (("n", "top", "limit"), ("k", "begin_at", "span_len")),
    },
)

SLICES = Template(
    doc="List helpers.",
    functions=(
        Function(
            "first",
            "def {first}({items}, {count}):\n    \"\"\"The first few items of a list.\"\"\"\n"
            "    return {items}[:{count}]\n",
            "the first `{count}` items of `{items}`",
            (([1, 2, 3, 4], 2), ([5, 6, 7], 3), (["a", "b"], 1)),
        ),
        Function(
            "last",
            "def {last}({items}):\n    \"\"\"The final item of a non-empty list.\"\"\"\n    return {items}[-1]\n",
            "the last item of the list",
            (([1, 2, 3],), (["x", "y"],), ([9, 8, 7, 6],)),
        ),
    ),
    bugs=(
        Bug("off-by-one", "first", "[:{count}]", "[:{count} - 1]"),
        Bug("off-by-one", "last", "return {items}[-1]", "return {items}[-2]"),
    ),
    names={
        "mod": (("lists", "listing", "picks"), ("queue_tools", "basket", "playlist")),
        "first": (("first_items", "head", "take"), ("leading", "front", "opening")),
        "last": (("last_item", "tail_item", "final"), ("newest", "closing", "back_one")),
        "items": (("items", "values", "things"), ("entries", "songs", "elements")),
        "count": (("count", "n", "how_many"), ("quantity", "k", "wanted")),
    },
)

POWERS = Template(
    doc="Powers of numbers.",
    functions=(
        Function(
            "power",
            "def {power}({base}, {exp}):\n    \"\"\"The base raised to the exponent.\"\"\"\n"
            "    return pow({base}, {exp})\n",
            "the base raised to the exponent",
            ((2, 3), (3, 2), (5, 1), (10, 3)),
        ),
        Function(
            "square",
            "def {square}({x}):\n    \"\"\"A number times itself.\"\"\"\n    return {power}({x}, 2)\n",
            "the square of the number",
            ((3,), (5,), (2,), (10,)),
            needs=("power",),
        ),
    ),
    bugs=(
        Bug("swapped-args", "power", "pow({base}, {exp})", "pow({exp}, {base})"),
        Bug("swapped-args", "square", "{power}({x}, 2)", "{power}(2, {x})"),
    ),
    names={
        "mod": (("powers", "maths_utils", "arith"), ("exponents", "algebra_kit", "growth")),
        "power": (("power", "raise_to", "pow_of"), ("lift", "exponentiate", "to_the")),
        "square": (("square", "squared", "sq"), ("self_product", "sqr", "doubled_power")),
        "base": (("base", "b", "number"), ("root", "factor", "mantissa")),
        "exp": (("exponent", "e", "times"), ("degree", "p", "order")),
        "x": (("x", "num", "val"), ("y", "side", "q")),
    },
)

AVERAGES = Template(
    doc="Small statistics helpers.",
    functions=(
        Function(
            "mean",
            "def {mean}({values}):\n    \"\"\"The arithmetic mean of a non-empty list.\"\"\"\n"
            "    return sum({values}) / len({values})\n",
            "the arithmetic mean of the values",
            (([2, 4],), ([1, 2, 3, 4],), ([10, 20, 60],), ([5],)),
        ),
        Function(
            "spread",
            "def {spread}({values}):\n    \"\"\"How far apart the extremes are.\"\"\"\n"
            "    return max({values}) - min({values})\n",
            "the difference between the largest and the smallest value",
            (([3, 1, 7],), ([5, 5],), ([10, 2],)),
        ),
    ),
    bugs=(
        Bug("wrong-operator", "mean", "sum({values}) / len(", "sum({values}) * len("),
        Bug("wrong-operator", "spread", "max({values}) - min(", "max({values}) + min("),
    ),
    names={
        "mod": (("stats", "summary", "figures"), ("metrics", "tally", "digest")),
        "mean": (("average", "mean", "avg"), ("typical", "centre", "midpoint")),
        "spread": (("spread", "value_range", "span"), ("gap", "extent", "width_of")),
        "values": (("values", "nums", "data"), ("samples", "points_list", "measures")),
    },
)

CLAMPS = Template(
    doc="Keeping numbers in bounds.",
    functions=(
        Function(
            "clamp",
            "def {clamp}({value}, {low}, {high}):\n    \"\"\"The value limited to the bounds.\"\"\"\n"
            "    {result} = max({low}, min({value}, {high}))\n    return {result}\n",
            "`{value}` limited to the range from `{low}` to `{high}`",
            ((15, 0, 10), (-3, 0, 10), (5, 0, 10), (100, 20, 50)),
        ),
        Function(
            "percent",
            "def {percent}({part}, {whole}):\n    \"\"\"A share as a percentage, at most 100.\"\"\"\n"
            "    {share} = 100 * {part} / {whole}\n    return {clamp}({share}, 0, 100)\n",
            "`{part}` as a percentage of `{whole}`, capped at 100",
            ((1, 4), (3, 4), (2, 8), (5, 4)),
            needs=("clamp",),
        ),
    ),
    bugs=(
        Bug("wrong-return", "clamp", "return {result}", "return {value}"),
        Bug("swapped-args", "percent", "100 * {part} / {whole}", "100 * {whole} / {part}"),
    ),
    names={
        "mod": (("bounds", "limits", "ranges"), ("gauge", "meter", "capping")),
        "clamp": (("clamp", "bound", "limit_to"), ("restrict", "pin", "squeeze")),
        "percent": (("percent", "as_percent", "share_of"), ("progress", "fill_level", "ratio_pct")),
        "value": (("value", "v0", "amount"), ("reading", "level", "raw")),
        "low": (("low", "lo", "minimum"), ("floor_value", "bottom", "least")),
        "high": (("high", "hi", "maximum"), ("ceiling", "upper", "most")),
        "result": (("result", "clamped", "bounded"), ("pinned", "kept", "out")),
        "part": (("part", "done", "got"), ("filled", "used", "spent")),
        "whole": (("whole", "total", "full"), ("capacity", "budget", "goal")),
        "share": (("share", "pct", "fraction"), ("portion", "level_pct", "fill_ratio")),
    },
)

PRICES = Template(
    doc="Shop prices.",
    functions=(
        Function(
            "discounted",
            "def {discounted}({price}, {rate}):\n    \"\"\"The price after a discount given in per cent.\"\"\"\n"
            "    {saving} = {price} * {rate} / 100\n    {final} = {price} - {saving}\n    return {final}\n",
            "the price after the discount",
            ((200, 10), (50, 20), (80, 50), (100, 0)),
        ),
        Function(
            "with_tax",
            "def {with_tax}({price}, {rate}):\n    \"\"\"The price plus a tax given in per cent.\"\"\"\n"
            "    return {price} * (1 + {rate} / 100)\n",
            "the price including the tax",
            ((200, 25), (100, 50), (40, 0), (10, 100)),
        ),
    ),
    bugs=(
        Bug("wrong-constant", "discounted", "{rate} / 100\n", "{rate} / 10\n"),
        Bug("wrong-return", "discounted", "return {final}", "return {saving}"),
        Bug("wrong-operator", "with_tax", "(1 + {rate}", "(1 - {rate}"),
    ),
    names={
        "mod": (("prices", "shop", "checkout"), ("billing", "invoice", "market")),
        "discounted": (("discounted", "sale_price", "reduce"), ("after_coupon", "markdown", "cut_price")),
        "with_tax": (("with_tax", "gross", "add_tax"), ("plus_vat", "taxed", "levy")),
        "price": (("price", "cost", "amount"), ("fee", "charge", "net")),
        "rate": (("rate", "percent", "pct"), ("ratio", "factor", "per_cent")),
        "saving": (("saving", "off", "reduction"), ("rebate", "cut", "knock_off")),
        "final": (("final", "new_price", "paid"), ("due", "settled", "outcome")),
    },
)

WORDS = Template(
    doc="Word helpers.",
    functions=(
        Function(
            "long_words",
            "def {long_words}({words}, {size}):\n    \"\"\"The words of at least the given length.\"\"\"\n"
            "    return [w for w in {words} if len(w) >= {size}]\n",
            "the words with at least `{size}` letters",
            ((["tree", "sky", "garden"], 4), (["ab", "abc"], 2), (["a", "bb"], 5)),
        ),
        Function(
            "initials",
            "def {initials}({words}):\n    \"\"\"The first letter of each word, upper-cased.\"\"\"\n"
            "    return \"\".join(w[0].upper() for w in {words})\n",
            "the first letter of each word, in upper case",
            ((["big", "red"],), (["ada", "lovelace"],), (["one", "two", "six"],)),
        ),
    ),
    bugs=(
        Bug("wrong-comparison", "long_words", "len(w) >= {size}", "len(w) > {size}"),
        Bug("off-by-one", "initials", "w[0].upper()", "w[1].upper()"),
    ),
    names={
        "mod": (("words", "text_utils", "wordplay"), ("lexicon", "phrases", "vocab")),
        "long_words": (("long_words", "at_least", "lengthy"), ("big_words", "min_length", "wordy")),
        "initials": (("initials", "acronym", "first_letters"), ("monogram", "abbreviate", "heads")),
        "words": (("words", "names", "tokens"), ("terms", "labels", "parts")),
        "size": (("size", "min_len", "letters"), ("length", "needed", "minimum_size")),
    },
)

LOOPS = Template(
    doc="Running totals.",
    functions=(
        Function(
            "total",
            "def {total}({n}):\n    \"\"\"The sum of the whole numbers 1 to {n}.\"\"\"\n    {acc} = 0\n"
            "    for {i} in range(1, {n} + 1):\n        {acc} += {i}\n    return {acc}\n",
            "the sum 1 + 2 + ... + `{n}`",
            ((4,), (3,), (10,), (1,)),
        ),
        Function(
            "factorial",
            "def {factorial}({n}):\n    \"\"\"The product of the whole numbers 1 to {n}.\"\"\"\n    {prod} = 1\n"
            "    for {i} in range(2, {n} + 1):\n        {prod} *= {i}\n    return {prod}\n",
            "the product 1 * 2 * ... * `{n}`",
            ((4,), (5,), (3,), (1,)),
        ),
    ),
    bugs=(
        Bug("off-by-one", "total", "range(1, {n} + 1)", "range(1, {n})"),
        Bug("wrong-return", "total", "return {acc}", "return {i}"),
        Bug("wrong-operator", "factorial", "{prod} *= {i}", "{prod} += {i}"),
        Bug("wrong-constant", "factorial", "{prod} = 1\n", "{prod} = 0\n"),
    ),
    names={
        "mod": (("totals", "sums", "accumulate"), ("cumulative", "products", "series_math")),
        "total": (("total", "sum_to", "triangle"), ("add_up", "running_sum", "upto_sum")),
        "factorial": (("factorial", "fact", "product_to"), ("multiply_up", "perm_count", "bang")),
        "n": (("n", "count", "last"), ("upto", "steps", "stop_at")),
        "acc": (("acc", "running", "subtotal"), ("tally", "so_far", "collected")),
        "prod": (("prod", "product", "result"), ("mult", "answer", "accum")),
        "i": (("i", "j", "step"), ("k", "idx", "term")),
    },
)

INTERVALS = Template(
    doc="Half-open intervals.",
    functions=(
        Function(
            "inside",
            "def {inside}({value}, {low}, {high}):\n"
            "    \"\"\"True when low is at most the value and the value is below high.\"\"\"\n"
            "    return {low} <= {value} < {high}\n",
            "True when `{low} <= {value} < {high}`",
            ((0, 0, 10), (5, 5, 9), (3, 0, 10), (10, 0, 10)),
        ),
        Function(
            "count_inside",
            "def {count_inside}({values}, {low}, {high}):\n    \"\"\"How many values lie in the interval.\"\"\"\n"
            "    return sum(1 for v in {values} if {inside}(v, {low}, {high}))\n",
            "how many values lie in the interval",
            (([1, 5, 9], 0, 10), ([2, 3], 1, 5), ([0, 20], 5, 10)),
            needs=("inside",),
        ),
    ),
    bugs=(
        Bug("wrong-comparison", "inside", "return {low} <= {value}", "return {low} < {value}"),
        Bug("swapped-args", "count_inside", "{inside}(v, {low}, {high})", "{inside}({low}, v, {high})"),
    ),
    names={
        "mod": (("intervals", "windows", "spans"), ("slots", "brackets", "zones")),
        "inside": (("inside", "in_range", "within"), ("in_slot", "covers", "contains_value")),
        "count_inside": (("count_inside", "how_many_in", "in_range_count"), ("slot_hits", "covered_count", "tally_in")),
        "value": (("value", "x", "point"), ("probe", "pos", "at")),
        "low": (("low", "start", "lo"), ("from_pos", "lower_edge", "left")),
        "high": (("high", "stop", "hi"), ("to_pos", "upper_edge", "right")),
        "values": (("values", "xs", "points"), ("positions", "probes_list", "stamps")),
    },
)

MINUTES = Template(
    doc="Time units.",
    functions=(
        Function(
            "seconds",
            "def {seconds}({minutes}):\n    \"\"\"Minutes in seconds.\"\"\"\n    return {minutes} * 60\n",
            "the number of seconds in that many minutes",
            ((2,), (5,), (0,), (10,)),
        ),
        Function(
            "hours",
            "def {hours}({minutes}):\n    \"\"\"Minutes in hours.\"\"\"\n    return {minutes} / 60\n",
            "the number of hours in that many minutes",
            ((120,), (30,), (90,), (0,)),
        ),
    ),
    bugs=(
        Bug("wrong-constant", "seconds", "return {minutes} * 60", "return {minutes} * 100"),
        Bug("wrong-operator", "hours", "return {minutes} / 60", "return {minutes} - 60"),
    ),
    names={
        "mod": (("timing", "clock", "durations"), ("schedule", "stopwatch", "agenda")),
        "seconds": (("to_seconds", "in_seconds", "secs"), ("as_seconds", "seconds_of", "tick_count")),
        "hours": (("to_hours", "in_hours", "hrs"), ("as_hours", "hours_of", "shift_length")),
        "minutes": (("minutes", "mins", "m"), ("span_minutes", "length_min", "t_min")),
    },
)

ELAPSED = Template(
    doc="Differences between readings.",
    functions=(
        Function(
            "difference",
            "def {difference}({a}, {b}):\n    \"\"\"How much larger the first number is.\"\"\"\n"
            "    return {a} - {b}\n",
            "how much larger the first number is than the second",
            ((10, 3), (7, 2), (5, 5), (1, 4)),
        ),
        Function(
            "elapsed",
            "def {elapsed}({start}, {end}):\n    \"\"\"The time from start to end.\"\"\"\n"
            "    return {difference}({end}, {start})\n",
            "the time that passed from start to end",
            ((3, 10), (0, 5), (4, 4), (1, 2)),
            needs=("difference",),
        ),
    ),
    bugs=(
        Bug("wrong-operator", "difference", "return {a} - {b}", "return {a} + {b}"),
        Bug("swapped-args", "elapsed", "{difference}({end}, {start})", "{difference}({start}, {end})"),
    ),
    names={
        "mod": (("elapsed", "readings", "deltas"), ("odometer", "timeline", "changes")),
        "difference": (("difference", "diff", "minus"), ("gap_between", "delta", "subtract")),
        "elapsed": (("elapsed", "duration", "time_taken"), ("journey", "distance_run", "span_of")),
        "a": (("a", "first", "larger"), ("p", "left_side", "top_value")),
        "b": (("b", "second", "smaller"), ("q", "right_side", "bottom_value")),
        "start": (("start", "begin", "t0"), ("departure", "opened", "origin")),
        "end": (("end", "finish", "t1"), ("arrival", "closed", "target")),
    },
)

LONGEST = Template(
    doc="Picking words.",
    functions=(
        Function(
            "longest",
            "def {longest}({words}):\n    \"\"\"The longest word; the earliest one wins a tie.\"\"\"\n"
            "    {best} = {words}[0]\n    for {word} in {words}:\n        if len({word}) > len({best}):\n"
            "            {best} = {word}\n    return {best}\n",
            "the longest word (the first one when several are equally long)",
            ((["a", "abc", "ab"],), (["tree", "a"],), (["ab", "cd"],), (["abc", "xyz", "q"],)),
        ),
        Function(
            "shortest_length",
            "def {shortest_length}({words}):\n    \"\"\"The length of the shortest word.\"\"\"\n"
            "    return min(len(w) for w in {words})\n",
            "the length of the shortest word",
            ((["a", "abc"],), (["tree", "sky"],)),
        ),
    ),
    bugs=(
        Bug("wrong-return", "longest", "return {best}", "return {word}"),
        Bug("wrong-comparison", "longest", "len({word}) > len(", "len({word}) >= len("),
    ),
    names={
        "mod": (("wordpick", "choosers", "selection"), ("contest", "picker", "winners")),
        "longest": (("longest", "longest_word", "biggest"), ("champion", "widest", "max_word")),
        "shortest_length": (
            ("shortest_length", "min_len_of", "smallest_size"),
            ("tiniest", "least_letters", "short_size"),
        ),
        "words": (("words", "names", "options"), ("entries", "labels", "candidates")),
        "best": (("best", "winner", "top"), ("leader", "chosen", "current")),
        "word": (("word", "candidate", "item"), ("entry", "label", "each")),
    },
)

TEMPLATES: tuple[Template, ...] = (
    RECTANGLE,
    TEMPERATURE,
    GRADES,
    SEQUENCES,
    SLICES,
    POWERS,
    AVERAGES,
    CLAMPS,
    PRICES,
    WORDS,
    LOOPS,
    INTERVALS,
    MINUTES,
    ELAPSED,
    LONGEST,
)
