export const f = new Function('a', 'return a');
