def build(expr):
    return eval(expr)
