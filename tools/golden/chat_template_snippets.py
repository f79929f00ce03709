#!/usr/bin/env python3
"""Expected renderings for tests/engine/template/jinja_features_test.cpp.

Renders each snippet with Jinja2 (3.1.x) configured as Hugging Face transformers
configures it for apply_chat_template: ImmutableSandboxedEnvironment,
trim_blocks=True, lstrip_blocks=True, the loopcontrols extension, tojson =
json.dumps(ensure_ascii=False, ...), raise_exception, and strftime_now on the fixed
clock 2025-03-14T09:26:53. Prints C++ table rows {template, context JSON, expected}.
Tooling only: nothing at build or test time needs Python.

    python3 tools/golden/chat_template_snippets.py > /tmp/rows.inc
"""
import json
from datetime import datetime

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime(2025, 3, 14, 9, 26, 53)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise Exception(message)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    return env


M = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}]

SNIPPETS = [
    # name, template, context
    ("if_elif_else", "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %},{% endfor %}", {}),
    ("for_loop_vars", "{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.length }}/{{ loop.first }}/{{ loop.last }} {% endfor %}", {"messages": M}),
    ("for_prev_next", "{% for m in messages %}[{{ loop.previtem.role if loop.previtem is defined else '-' }}>{{ m.role }}>{{ loop.nextitem.role if loop.nextitem is defined else '-' }}]{% endfor %}", {"messages": M}),
    ("for_else_and_filter", "{% for m in messages if m.role == 'tool' %}{{ m.content }}{% else %}no tools{% endfor %}|{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.content }} {% endfor %}", {"messages": M}),
    ("for_cycle", "{% for i in range(5) %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}", {}),
    ("for_break_continue", "{% for i in range(10) %}{% if i % 2 == 0 %}{% continue %}{% endif %}{% if i > 6 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("for_unpack_items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d|items %}{{ k }}{% endfor %}{% for (a, b) in [(1, 2), (3, 4)] %}{{ a + b }}{% endfor %}", {"d": {"z": 1, "a": [1, 2], "m": None}}),
    ("set_scoping", "{% set x = 1 %}{% for i in range(3) %}{% set x = x + i %}{{ x }}{% endfor %}|{{ x }}{% if true %}{% set x = 5 %}{% endif %}|{{ x }}", {}),
    ("namespace", "{% set ns = namespace(count=0, last=none) %}{% for m in messages %}{% set ns.count = ns.count + 1 %}{% set ns.last = m.role %}{% endfor %}{{ ns.count }} {{ ns.last }}", {"messages": M}),
    ("set_tuple_and_block", "{% set a, b = 1, 'two' %}{{ a }}{{ b }}{% set block %}  x {{ a }} {% endset %}[{{ block }}]{% set up | upper %}shout{% endset %}{{ up }}", {}),
    ("macro_defaults_kwargs", "{% macro greet(name, punct='!', loud=false) %}{{ (name|upper if loud else name) ~ punct }}{% endmacro %}{{ greet('ann') }} {{ greet('bob', '?') }} {{ greet(name='cy', loud=true) }} {{ greet('dee', loud=true, punct='.') }}", {}),
    ("macro_varargs_kwargs", "{% macro f(a) %}{{ a }}|{{ varargs }}|{{ kwargs }}{% endmacro %}{{ f(1, 2, 3, x=4) }}", {}),
    ("macro_recursion", "{% macro t(spec) %}{% if spec.type == 'array' %}list[{{ t(spec['items']) }}]{% elif spec.type == 'object' %}dict{% else %}{{ spec.type }}{% endif %}{% endmacro %}{{ t({'type': 'array', 'items': {'type': 'array', 'items': {'type': 'str'}}}) }}", {}),
    ("call_block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ 1 + 1 }}{% endcall %}{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(v) each([1, 2]) %}<{{ v }}>{% endcall %}", {}),
    ("filter_block_raw", "{% filter upper %}hello {{ name }}{% endfilter %} {% raw %}{{ not rendered }} {% if %}{% endraw %}", {"name": "you"}),
    ("whitespace_trim_lstrip", "<ul>\n  {% for x in [1, 2] %}\n    <li>{{ x }}</li>\n  {% endfor %}\n</ul>\n  {# comment #}\nend", {}),
    ("whitespace_minus_plus", "a   {{- ' b ' -}}   c\n  {%- if true -%}  d  {%- endif %}\n  {%+ if true %}e{% endif %}\n{{ 'f' }}  \n  {% if true +%}\ng{% endif %}", {}),
    ("arithmetic", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1 + 2.5 }} {{ 10 - 3 * 2 }} {{ (1 + 2) * 3 }} {{ 'ab' * 3 }} {{ [1] + [2, 3] }} {{ 'x' ~ 1 ~ none }} {{ true + 1 }} {{ -(3) }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1.5e-5 }} {{ 100.0 }}", {}),
    ("comparisons", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'cat' }} {{ none == none }} {{ undefined_thing == none }} {{ 1 != 2 }}", {}),
    ("logic", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ not [] }} {{ none or [] }} {{ 'yes' if x else 'no' }} {{ 'yes' if y else 'no' }}[{{ 'only' if false }}]", {"x": [0], "y": ""}),
    ("subscript_slice", "{{ xs[0] }} {{ xs[-1] }} {{ xs[1:] }} {{ xs[:2] }} {{ xs[::-1] }} {{ xs[::2] }} {{ xs[-2:] }} {{ s[1:4] }} {{ s[::-1] }} {{ s[-1] }} {{ d['k'] }} {{ d.k }} {{ xs.0 }} [{{ xs[10] }}]", {"xs": [1, 2, 3, 4], "s": "h\u00e9llo\u4e16", "d": {"k": "v"}}),
    ("tests", "{{ x is defined }} {{ nope is defined }} {{ nope is undefined }} {{ n is none }} {{ s is string }} {{ d is mapping }} {{ xs is iterable }} {{ s is iterable }} {{ 1 is number }} {{ 1.5 is integer }} {{ 4 is divisibleby 2 }} {{ 3 is odd }} {{ 3 is even }} {{ f is false }} {{ t is true }} {{ xs is sequence }} {{ 2 is in xs }} {{ s is not string }} {{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ 'ab' is lower }}", {"x": 1, "n": None, "s": "str", "d": {}, "xs": [1, 2], "f": False, "t": True}),
    ("string_methods", "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a-b-c'.split('-', 1) }}|{{ 'a-b-c'.rsplit('-', 1) }}|{{ 'Hello'.startswith('He') }}|{{ 'Hello'.endswith(('x', 'lo')) }}|{{ 'MiXed'.upper() }}{{ 'MiXed'.lower() }}|{{ 'a b'.replace(' ', '_') }}|{{ 'hello world'.title() }}|{{ 'hELLO'.capitalize() }}|{{ 'abc'.find('c') }}|{{ '{} and {name}'.format(1, name='x') }}|{{ ', '.join(['a', 'b']) }}|{{ '\\n\\nx'.lstrip('\\n') }}", {"s": "  pad  "}),
    ("dict_methods", "{{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }}", {"d": {"a": 1, "b": "two"}}),
    ("filters_basic", "{{ xs|length }} {{ s|length }} {{ ' t '|trim }} {{ xs|join(', ') }} {{ xs|first }} {{ xs|last }} {{ s|list }} {{ 3|string }}{{ '42'|int + 1 }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 4.9|int }} {{ '2.5'|float }} {{ '<b>'|safe }} {{ xs|reverse|list }} {{ s|upper }} {{ 'AbC'|lower }} {{ 'ab'|capitalize }} {{ 'a b'|title }} {{ 'aXa'|replace('a', 'y') }} {{ -3|abs }} {{ xs|sum }} {{ xs|min }} {{ xs|max }} {{ 2.5|round }} {{ 3.14159|round(2) }} {{ 3.1|round(0, 'ceil') }} {{ '<a & \"b\">'|escape }} {{ 'one two  three'|wordcount }} {{ [3, 1, 2]|sort }} {{ ['b', 'A', 'a']|unique|list }} {{ {'b': 1, 'a': 2}|dictsort }} {{ xs|count }}", {"xs": [3, 1, 2], "s": "h\u00e9"}),
    ("filter_default", "{{ nope|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ none|default('d') }} {{ x|d('d') }}", {"x": 0}),
    ("filter_map_select", "{{ ms|map(attribute='role')|list }} {{ ms|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }} {{ ms|rejectattr('role', 'in', ['system', 'user'])|list|length }} {{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} {{ [0, 1, '', 'a']|select|list }} {{ ['a', 'b']|map('upper')|list }} {{ ms|selectattr('tool_calls')|list }} {{ ms|map(attribute='nope', default='-')|list }}", {"ms": M}),
    ("filter_tojson", "{{ d|tojson }}\n{{ d|tojson(indent=2) }}\n{{ d|tojson(sort_keys=true) }}\n{{ 'caf\u00e9 \"q\" \\\\ \\n \\t \u4e16'|tojson }}\n{{ [1.0, 2.5, 1e16, none, true]|tojson }}\n{{ {}|tojson(indent=4) }}{{ []|tojson }}\n{{ d|tojson(separators=(',', ':')) }}\n{{ 'caf\u00e9 \U0001F600'|tojson(ensure_ascii=true) }}", {"d": {"b": [1, {"x": None}], "a": "\u00e9", "c": {}}}),
    ("filter_indent_center", "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'ab'|center(7) }}|", {}),
    ("str_of_values", "{{ [1, 'a', none, true, 1.5, \"it's\"] }} {{ {'k': [1, (2,)], 2: none} }} {{ (1,) }} {{ () }} {{ none }} {{ true }} {{ nope }}|{{ 'q\\'\"'.split('x') }}", {}),
    ("globals", "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(3, 0, -1)|list }} {{ strftime_now('%Y-%m-%d %H:%M:%S %A %b %d') }} {{ dict(a=1) }} {{ namespace(x=1).x }}", {}),
    ("context_messages", "{{ bos_token }}{% for m in messages %}{% if m.content is string %}<{{ m.role }}>{{ m.content }}{% else %}{% for p in m.content %}[{{ p.type }}:{{ p.text }}]{% endfor %}{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}{% if enable_thinking is defined and not enable_thinking %}<nothink>{% endif %}", {"bos_token": "<s>", "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": [{"type": "text", "text": "b"}, {"type": "text", "text": "c"}]}], "add_generation_prompt": True, "enable_thinking": False}),
    ("with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
]

ERRORS = [
    # name, template, context (render fails in Jinja2 too)
    ("raise", "{{ raise_exception('Only user and assistant roles are supported!') }}", {}),
    ("undefined_attr_of_undefined", "{{ nope.attr }}", {}),
    ("undefined_plus_string", "{{ d.missing + 'x' }}", {"d": {}}),
    ("none_not_iterable", "{% for x in n %}{% endfor %}", {"n": None}),
    ("str_plus_int", "{{ 'a' + 1 }}", {}),
    ("immutable_list", "{{ xs.append(1) }}", {"xs": []}),
    ("unknown_filter", "{{ x|nosuchfilter }}", {}),
    ("unknown_tag", "{% frobnicate %}", {}),
    ("unterminated_if", "{% if true %}x", {}),
]


def cxx(s):
    return json.dumps(s, ensure_ascii=False)


def main():
    env = make_env()
    for name, src, ctx in SNIPPETS:
        out = env.from_string(src).render(**ctx)
        print("    {%s, R\"GBT(%s)GBT\", R\"GBT(%s)GBT\", %s}," % (cxx(name), src, json.dumps(ctx, ensure_ascii=False), cxx(out)))
    print("// errors")
    for name, src, ctx in ERRORS:
        try:
            env.from_string(src).render(**ctx)
            print("// %s: rendered!" % name)
        except Exception as e:  # noqa: BLE001 - we want the message whatever it is
            print("// %s: %s: %s" % (name, type(e).__name__, e))


if __name__ == "__main__":
    main()
