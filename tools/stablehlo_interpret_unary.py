import json, re, sys
OPS = {"abs": "abs", "negate": "neg", "sign": "sign", "not": "not", "floor": "floor", "ceil": "ceil",
       "round_nearest_even": "round_nearest_even", "round_nearest_afz": "round_nearest_afz",
       "is_finite": "is_finite", "popcnt": "popcnt", "count_leading_zeros": "clz", "sqrt": "sqrt",
       "exponential": "exp", "exponential_minus_one": "expm1", "log": "log", "log_plus_one": "log1p",
       "logistic": "logistic", "tanh": "tanh", "rsqrt": "rsqrt", "cbrt": "cbrt", "sine": "sin",
       "cosine": "cos", "tan": "tan", "convert": "convert"}

def parse_dense(body):
    # body: contents of dense<...>; returns flat list of value strings (complex as [re, im])
    body = body.strip()
    vals = []
    # complex pairs
    for m in re.finditer(r"\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*\)|([^\[\],\s()]+)", body):
        if m.group(1) is not None:
            vals.append([m.group(1).strip(), m.group(2).strip()])
        else:
            vals.append(m.group(3).strip())
    return vals

def parse_type(t):
    m = re.match(r"tensor<((?:\d+x)*)(.+)>$", t.strip())
    dims = [int(d) for d in m.group(1).split("x") if d]
    return dims, m.group(2)

cases = []
for hlo, op in OPS.items():
    text = open(f"/tmp/interp/{hlo}.mlir").read()
    for func in text.split("// -----"):
        m = re.search(r"func\.func @(\w+)", func)
        if not m:
            continue
        name = m.group(1)
        body = re.sub(r"//[^\n]*", "", func)
        body = " ".join(body.split())
        const = re.search(r"stablehlo\.constant dense<(.*?)>\s*:\s*(tensor<(?:[^<>]|<[^<>]*>)*>)", body)
        check = re.search(r"check\.(expect_eq_const|expect_almost_eq_const) %\w+, dense<(.*?)>\s*:\s*(tensor<(?:[^<>]|<[^<>]*>)*>)", body)
        if not const or not check:
            print("skip", name, file=sys.stderr); continue
        ishape, itype = parse_type(const.group(2))
        oshape, otype = parse_type(check.group(3))
        ivals, ovals = parse_dense(const.group(1)), parse_dense(check.group(2))
        n = 1
        for d in ishape: n *= d
        if len(ivals) == 1 and n != 1: ivals = ivals * n
        m2 = 1
        for d in oshape: m2 *= d
        if len(ovals) == 1 and m2 != 1: ovals = ovals * m2
        assert len(ivals) == n and len(ovals) == m2, (name, ivals, ovals)
        case = {"name": name, "op": op, "inputs": [{"shape": ishape, "type": itype, "values": ivals}],
                "expected": {"shape": oshape, "type": otype, "values": ovals},
                "check": "eq" if check.group(1) == "expect_eq_const" else "almost"}
        tol = re.search(r"tolerance\s*=\s*([0-9.e+-]+)", body)
        if case["check"] == "almost":
            case["tolerance"] = float(tol.group(1)) if tol else 1e-4
        cases.append(case)
json.dump({"source": "openxla/stablehlo stablehlo/tests/interpret/{abs,negate,sign,not,floor,ceil,round_nearest_even,round_nearest_afz,is_finite,popcnt,count_leading_zeros,sqrt,exponential,exponential_minus_one,log,log_plus_one,logistic,tanh,rsqrt,cbrt,sine,cosine,tan,convert}.mlir (inputs and expected outputs)", "cases": cases}, open("/work/main/tests/data/stablehlo_interpret_unary.json", "w"), separators=(",", ":"))
print(len(cases))
from collections import Counter
print(Counter((c["op"], c["inputs"][0]["type"]) for c in cases))
