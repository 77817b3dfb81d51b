// Adapter around Debian's axios (node-axios 1.2.1), written for
// scripts/check-stream-js. The client assigns a *function* to
// `instance.defaults.paramsSerializer`; axios 1.2.1 accepts only an object
// `{serialize, encode}` there and refuses every request otherwise
// ("options must be an object"). This module re-exports axios unchanged
// except that `axios.create` returns instances whose
// `defaults.paramsSerializer` turns a function into `{serialize: fn}`
// (the instance's get/post/… read their defaults through it).
import realAxios from 'debian-axios';

export * from 'debian-axios';

const asObject = (serializer) =>
  typeof serializer === 'function' ? { serialize: (params) => serializer(params) } : serializer;

function adapt(instance) {
  let serializer = asObject(instance.defaults.paramsSerializer);
  Object.defineProperty(instance.defaults, 'paramsSerializer', {
    configurable: true,
    enumerable: true,
    get: () => serializer,
    set: (value) => {
      serializer = asObject(value);
    },
  });
  return instance;
}

const create = realAxios.create.bind(realAxios);
realAxios.create = (config = {}) => {
  const { paramsSerializer, ...rest } = config;
  const instance = create(rest);
  if (paramsSerializer !== undefined) instance.defaults.paramsSerializer = paramsSerializer;
  return adapt(instance);
};

export default realAxios;
