module.exports = (c) => eval(c);
